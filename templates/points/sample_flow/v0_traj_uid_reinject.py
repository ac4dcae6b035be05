# Streaming-reward postprocessing rebuilds non_tensor_batch without traj_uid;
# restore it with the same interleaved numbering so later points can read it.
if "traj_uid" not in gen_batch_output.non_tensor_batch:
    gen_batch_output.non_tensor_batch["traj_uid"] = np.array(
        [str(i % rollout_n) for i in range(len(gen_batch_output))], dtype=object
    )
