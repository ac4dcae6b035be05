trace_flow(uid=batch_dict["uid"], traj_uid='N/A', from_module='DataLoader',
           to_module='PPOTrainerV1', stage='DATA_PREPROCESS', detail='uid_generated',
           global_step=self.global_steps)
