# Step banner in the colocated trainer's format.
log_progress(
    '=' * 20
    + f' Epoch {epoch}, consumed {batches_consumed} batches, Step {self.global_steps} '
    + '=' * 20
)
batches_consumed += 1
