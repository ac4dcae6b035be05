trace_flow(uid='*', traj_uid='*', from_module='CheckpointEngineManager',
           to_module='RolloutReplica', stage='SYNC_PARAMS',
           detail=f'weights_synced_global_step={self.global_steps}',
           global_step=self.global_steps)
