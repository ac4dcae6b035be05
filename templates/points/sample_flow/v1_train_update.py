_t_uids, _t_trajs = _trace_ids_from_batch(batch)
trace_flow(uid=_t_uids, traj_uid=_t_trajs,
           from_module='ActorRolloutWorker', to_module='PPOTrainerV1',
           stage='TRAIN_UPDATE', detail='actor_parameters_updated',
           global_step=self.global_steps)
