# TensorDict hands out uids wrapped in NonTensorData: unwrap them; a batch without uid
# is traced as 'unknown' (a TensorDict answers `key in td.keys()`)
trace_flow(uid=[str(getattr(_uid, "data", _uid))
                for _uid in (batch["uid"] if "uid" in batch.keys() else ["unknown"])],
           traj_uid='N/A',
           from_module='PPOTrainerV1', to_module='AgentLoopManagerTQ',
           stage='DATA_DISPATCH', detail='dispatched_to_agent_loop_manager',
           global_step=self.global_steps)
