"""Training callbacks: atomic backup/restore, non-finite loss guard, BLEU.

`CheckpointAndRestore` is `keras.callbacks.BackupAndRestore` with numbered,
atomically written, verified checkpoints (see `checkpoints.py`), the last
`keep` of them kept. `train()` runs `model.fit` in epochs of
`checkpoint_every` optimizer steps over a repeated dataset; with
`train_steps`, the last epoch ends at that step, however many steps it has
left, and is checkpointed like the others. Each checkpoint records its step,
so on restart the callback restores weights, optimizer and dropout RNG
state, and `train()` skips the `consumed_batches`.

Example:

>>> restore = CheckpointAndRestore("run/checkpoints", checkpoint_every=1000,
...                                batches_per_step=1, keep=5, train_steps=2500)
>>> restore.initial_epoch, restore.epochs  # (0, 3) for a new run: 1000, 2000, 2500
>>> model.fit(dataset.repeat().skip(restore.consumed_batches),
...           steps_per_epoch=1000, epochs=restore.epochs,
...           initial_epoch=restore.initial_epoch, callbacks=[restore])
"""

import math
import time

import keras

from keras_transformer.evaluation import corpus_bleu
from keras_transformer.training import checkpoints as ckpt


def _print(message):
    print(message, flush=True)


class CheckpointAndRestore(keras.callbacks.BackupAndRestore):
    """Every epoch end, a checkpoint; at `fit` start, restore the newest intact one.

    Args:
        directory: str. Checkpoint directory.
        checkpoint_every: int. Optimizer steps per epoch (and per checkpoint).
        batches_per_step: int. `model.fit` batches per optimizer step (the
            gradient accumulation steps).
        keep: int. Newest checkpoints kept on disk.
        write: bool. Only the chief worker writes; the others only restore.
        log: callable taking a message.
        train_steps: optional int. The step training ends at: the epoch that
            reaches it stops there (with a checkpoint), and `epochs` is the
            `fit` argument that gets there. `None`: every epoch is whole.
    """

    def __init__(self, directory, checkpoint_every, batches_per_step=1, keep=5, write=True, log=_print,
                 train_steps=None):
        super().__init__(directory, save_freq="epoch", delete_checkpoint=False)
        self.checkpoint_every = int(checkpoint_every)
        self.batches_per_step = int(batches_per_step)
        self.keep = int(keep)
        self.write = write
        self.log = log
        self.train_steps = None if train_steps is None else int(train_steps)
        self.checkpoint = ckpt.latest_checkpoint(directory, log=log)
        # Read once, here: the run goes on writing and pruning checkpoints,
        # the one it resumed from among them.
        metadata = {} if self.checkpoint is None else self.checkpoint.metadata()
        self.initial_step = int(metadata.get("step", 0))
        self.initial_epoch = int(metadata.get("epoch", 0))
        self._begin_epoch(self.initial_epoch)

    @property
    def epochs(self):
        """The `epochs` argument of `fit` that ends at `train_steps`."""
        if self.train_steps is None:
            raise ValueError("`epochs` needs `train_steps`. Received: train_steps=None")
        left = max(0, self.train_steps - self.initial_step)
        return self.initial_epoch + -(-left // self.checkpoint_every)

    def epoch_end_step(self, epoch):
        """The optimizer step that `fit` epoch `epoch` ends at (and is checkpointed as)."""
        step = self.initial_step + (epoch + 1 - self.initial_epoch) * self.checkpoint_every
        return step if self.train_steps is None else min(step, self.train_steps)

    def _expected_batches(self, epoch):
        start = self.initial_step + (epoch - self.initial_epoch) * self.checkpoint_every
        return (self.epoch_end_step(epoch) - start) * self.batches_per_step

    @property
    def consumed_batches(self):
        """`model.fit` batches already trained on: skip these on resume."""
        return self.initial_step * self.batches_per_step

    def _restore(self):
        if self.checkpoint is None:
            return
        if not self.model.built:
            raise ValueError("Build the model before fit() to restore a checkpoint.")
        ckpt.restore_checkpoint(self.model, self.checkpoint)
        self.log(
            f"Resumed from {self.checkpoint.weights_path}: step {self.initial_step}, "
            f"skipping {self.consumed_batches} consumed batches."
        )
        if self.train_steps is not None and self.initial_step > self.train_steps:
            kept = ", ".join(str(c.step) for c in ckpt.list_checkpoints(self.backup_dir))
            self.log(
                f"Nothing to train: the run is at step {self.initial_step}, past train_steps={self.train_steps}, "
                f"and keeps the weights of step {self.initial_step}. Its checkpoints in {self.backup_dir}: "
                f"steps {kept}."
            )
        elif self.initial_step == self.train_steps:
            self.log(f"Nothing to train: the run has reached train_steps={self.train_steps}.")

    def on_train_begin(self, logs=None):
        self._restore()

    def _begin_epoch(self, epoch):
        """What the batches of `fit` epoch `epoch` check, worked out once."""
        self._epoch = epoch
        self._batches_in_epoch = 0
        self._expected = self._expected_batches(epoch)
        # The last epoch may be shorter than `steps_per_epoch`: it stops itself.
        self._stops_fit = self.train_steps is not None and self.epoch_end_step(epoch) == self.train_steps

    def on_epoch_begin(self, epoch, logs=None):
        self._begin_epoch(epoch)

    def on_train_batch_end(self, batch, logs=None):
        self._batches_in_epoch += 1
        if self._stops_fit and self._batches_in_epoch == self._expected:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        expected = self._expected
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.log(f"Not writing a checkpoint for epoch {epoch + 1}: its loss is {float(loss)}.")
            return
        if self._batches_in_epoch != expected:
            self.log(
                f"Not writing a checkpoint for epoch {epoch + 1}: it stopped after "
                f"{self._batches_in_epoch} of {expected} batches."
            )
            return
        if not self.write:
            return
        # A finite loss is computed before the step's update; the update itself
        # can still overflow (a diverging run), and a checkpoint of non-finite
        # weights would be the one a restart resumes from.
        non_finite = [v.path for v in self.model.trainable_variables
                      if not bool(keras.ops.convert_to_numpy(keras.ops.all(keras.ops.isfinite(v))))]
        if non_finite:
            self.log(
                f"Not writing a checkpoint for epoch {epoch + 1}: {len(non_finite)} weights are "
                f"not finite (the first: {non_finite[0]})."
            )
            return
        step = self.epoch_end_step(epoch)
        ckpt.save_checkpoint(self.model, self.backup_dir, step=step, epoch=epoch + 1)
        ckpt.prune_checkpoints(self.backup_dir, self.keep)

    def on_train_end(self, logs=None):
        pass  # checkpoints are kept: they are the run's history


class TimeLimit(keras.callbacks.Callback):
    """Ends `fit` at the first epoch end after `seconds` of training.

    Epochs are checkpoint intervals in `train()`, so the run stops right
    after a checkpoint, and a restart resumes from it (with a fresh clock).
    For fixed-time comparisons ("what does this much training time give").

    Args:
        seconds: float > 0. Training time, from the start of `fit`.
        log: callable taking a message.
    """

    def __init__(self, seconds, log=_print):
        super().__init__()
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
            raise ValueError(f"Argument `seconds` must be a number > 0. Received: seconds={seconds!r}")
        self.seconds = float(seconds)
        self.log = log
        self.stopped_at_epoch = None

    def on_train_begin(self, logs=None):
        self.start = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        elapsed = time.monotonic() - self.start
        if elapsed >= self.seconds:
            self.model.stop_training = True
            self.stopped_at_epoch = epoch + 1
            self.log(f"Time limit: {elapsed:.0f} s >= {self.seconds:.0f} s; stopping after epoch {epoch + 1}.")


class NonFiniteLossGuard(keras.callbacks.Callback):
    """Stops training at the first non-finite loss, saying so.

    No checkpoint is written for the interrupted epoch (nor by
    `CheckpointAndRestore` for an epoch that ends with non-finite weights),
    so a restart resumes from the last finite one. (Under `mixed_float16`,
    steps whose gradients overflow are already skipped by the loss scale
    optimizer; only a non-finite loss itself stops training.)
    """

    def __init__(self, batches_per_step=1, log=_print):
        super().__init__()
        self.batches_per_step = batches_per_step
        self.log = log
        self.stopped_at = None
        self._batch = 0

    def on_train_batch_end(self, batch, logs=None):
        self._batch += 1
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.stopped_at = self._batch // self.batches_per_step
            self.model.stop_training = True
            self.log(
                f"Non-finite loss ({float(loss)}) at step {self.stopped_at} of this run: "
                "stopping training (not skipping the step). The last checkpoint is intact; "
                "lower the learning rate or check the data, then restart to resume from it."
            )


class BleuCallback(keras.callbacks.Callback):
    """Corpus BLEU on a validation set, logged as `val_bleu`
    (`keras_transformer.evaluation.corpus_bleu`).

    Args:
        translate_fn: callable `list[str] -> list[str]` (e.g. a decoding
            `Translator`'s translate method).
        sources: list of source sentences.
        references: list of reference translations, one per source.
        every: int. Score every `every` epochs (checkpoint intervals).
        tokenize: sacrebleu tokenizer name (`"13a"`, `"intl"`, ...).

    Example:

    >>> BleuCallback(translator.translate, sources, references, every=5)
    """

    def __init__(self, translate_fn, sources, references, every=1, tokenize="13a", log=_print):
        super().__init__()
        if len(sources) != len(references):
            raise ValueError(
                f"Need one reference per source. Received {len(sources)} sources "
                f"and {len(references)} references."
            )
        self.translate_fn = translate_fn
        self.sources = list(sources)
        self.references = list(references)
        self.every = every
        self.tokenize = tokenize
        self.log = log

    def score(self):
        hypotheses = list(self.translate_fn(self.sources))
        return corpus_bleu(hypotheses, [[reference] for reference in self.references], self.tokenize)[0].score

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every:
            return
        bleu = self.score()
        if logs is not None:
            logs["val_bleu"] = bleu
        self.log(f"Epoch {epoch + 1}: validation BLEU {bleu:.2f}")
