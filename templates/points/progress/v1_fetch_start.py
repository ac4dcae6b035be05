if _pp:
    log_progress(
        f'Trainer: try to load global batch@{self.global_steps}, chunk[0/0] from replay_queue'
    )
else:
    log_progress('start generation')
