# Number each rollout of a prompt (interleaved repeat: 0..n-1), then trace it
# (a batch without uid as 'unknown').
gen_batch_output.non_tensor_batch["traj_uid"] = np.array(
    [str(i % rollout_n) for i in range(len(gen_batch_output))], dtype=object
)
trace_flow(uid=(gen_batch_output.non_tensor_batch["uid"]
                if "uid" in gen_batch_output.non_tensor_batch else "unknown"),
           traj_uid=gen_batch_output.non_tensor_batch["traj_uid"],
           from_module='RayPPOTrainer', to_module='RayPPOTrainer',
           stage='DATA_PREPROCESS', detail='traj_uid_generated_by_repeat',
           global_step=self.global_steps)
