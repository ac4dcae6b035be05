
def _logged_train_dataloader(self):
    """The train dataloader's batches, each fetch framed by the two replay-queue progress lines."""
    # a fresh iterator per epoch: StopIteration ends the epoch exactly like the plain for loop
    while True:
        log_progress(
            f"Trainer: try to load global batch@{self.global_steps}, chunk[0/0] from replay_queue"
        )
        try:
            batch_dict = next(self._train_dataloader_iter)
        except StopIteration:
            return
        log_progress(
            f"Trainer: successfully load global batch@{self.global_steps}, chunk[0/0] from replay_queue"
        )
        yield batch_dict
