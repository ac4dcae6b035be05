# Run header for the progress panel: step total, then the config lines it parses.
log_progress(f'Total training steps: {self.total_training_steps}')
_actor_cfg = self.config.actor_rollout_ref.actor
_num_minibatches = _actor_cfg.ppo_epochs * (
    self.config.data.train_batch_size
    * self.config.actor_rollout_ref.rollout.n
    // _actor_cfg.ppo_mini_batch_size
)
for _cfg_line in (
    f"'train_batch_size': {self.config.data.train_batch_size},",
    f"'rollout_n': {self.config.actor_rollout_ref.rollout.n},",
    f"'ppo_mini_batch_size': {_actor_cfg.ppo_mini_batch_size},",
    f"'num_minibatches': {_num_minibatches},",
    f"'total_training_steps': {self.total_training_steps}",
):
    log_progress(_cfg_line)
