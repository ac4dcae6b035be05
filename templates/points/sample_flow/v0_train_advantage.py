_traj_uids = batch.non_tensor_batch.get("traj_uid", np.array(["N/A"] * len(batch)))
trace_flow(uid=batch.non_tensor_batch['uid'] if 'uid' in batch.non_tensor_batch else 'unknown',
           traj_uid=_traj_uids,
           from_module='RayPPOTrainer', to_module='RayPPOTrainer',
           stage='TRAIN_ADVANTAGE', detail='advantage_computed',
           global_step=self.global_steps)
