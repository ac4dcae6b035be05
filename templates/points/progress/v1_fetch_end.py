if _pp:
    log_progress(
        f'Trainer: successfully load global batch@{self.global_steps}, chunk[0/0] from replay_queue'
    )
else:
    log_progress('end generation')
