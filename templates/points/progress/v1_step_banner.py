# step banner: the separated format is Step only, the colocated one adds epoch and batches
if _pp:
    log_progress('=' * 20 + f' Step {self.global_steps} ' + '=' * 20)
else:
    log_progress(
        '=' * 20
        + f' Epoch {current_epoch}, consumed {(self.global_steps - 1) % self.steps_per_epoch} batches,'
        + f' Step {self.global_steps} '
        + '=' * 20
    )
