trace_flow(uid=batch.non_tensor_batch["uid"], traj_uid='N/A',
           from_module='DataLoader', to_module='RayPPOTrainer',
           stage='DATA_PREPROCESS', detail='uid_generated',
           global_step=self.global_steps)
