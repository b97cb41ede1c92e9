"""Faults at a chosen optimizer step of a training process, for the kill-and-resume tests.

    python tests/training/faults.py [--kill-writing-step K] [--stall-at-step K] \
        [--file-size-limit-at-step K] [--intra-op-threads N] -- train --corpus synthetic-reverse ...

runs the `keras-transformer` command line (`keras_transformer.cli.main`,
as the process's own, so an error ends it with status 1 and its message)
with `Faults` among its callbacks; `run_training.py` gives `train()` the
same callback. Steps are the run's optimizer steps, counted from 0 however
often the run was resumed:

- `--kill-writing-step K`: SIGKILL in the middle of writing the checkpoint
  of step K (its weights file half written under its temporary name);
- `--stall-at-step K`: wait at the end of step K until killed, or sent
  SIGUSR1 (then go on);
- `--file-size-limit-at-step K`: from the end of step K on, no file may
  grow past `FILE_SIZE_LIMIT` (`RLIMIT_FSIZE`; writes past it fail with `EFBIG`, as
  on a full disk, rather than SIGXFSZ ending the process), so the next
  checkpoint does not fit.

As in the pytest process (tests/conftest.py), TensorFlow rewrites no
graph: the runs are compared with its own bit for bit.
"""

import argparse
import contextlib
import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402

FILE_SIZE_LIMIT = 1 << 20


def add_arguments(parser):
    parser.add_argument("--kill-writing-step", type=int, default=0)
    parser.add_argument("--stall-at-step", type=int, default=0)
    parser.add_argument("--file-size-limit-at-step", type=int, default=0)


class Faults(keras.callbacks.Callback):
    """The faults of `add_arguments`' options, `batches_per_step` batches a step."""

    def __init__(self, args, batches_per_step=1):
        super().__init__()
        self.args = args
        self.batches_per_step = batches_per_step
        self.step = self.batches = 0
        self.stalled = bool(args.stall_at_step)

    def on_train_begin(self, logs=None):  # after the run's checkpoint is restored
        self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.batches = self.step * self.batches_per_step
        if self.stalled:
            signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "stalled", False))
        if self.args.kill_writing_step:
            faults = self
            save_weights = keras.Model.save_weights

            def save_weights_then_die(model, path, *args, **kwargs):
                save_weights(model, path, *args, **kwargs)
                if faults.step == faults.args.kill_writing_step:
                    os.truncate(path, os.path.getsize(path) // 2)
                    os.kill(os.getpid(), signal.SIGKILL)

            keras.Model.save_weights = save_weights_then_die

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches % self.batches_per_step:
            return
        self.step = self.batches // self.batches_per_step
        while self.step == self.args.stall_at_step and self.stalled:
            time.sleep(0.1)
        if self.step == self.args.file_size_limit_at_step:
            import resource

            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


@contextlib.contextmanager
def in_every_fit(args, batches_per_step):
    """`Faults(args, batches_per_step)` among the callbacks of every
    `keras.Model.fit` in the block."""
    fit = keras.Model.fit

    def fit_with_faults(model, *fit_args, callbacks=None, **kwargs):
        return fit(model, *fit_args, callbacks=[*(callbacks or []), Faults(args, batches_per_step)], **kwargs)

    keras.Model.fit = fit_with_faults
    try:
        yield
    finally:
        keras.Model.fit = fit


def same_as_the_test_process(intra_op_threads):
    """TensorFlow's settings of the pytest process, whose runs these are compared with."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        from tests.helpers import graph_rewrites

        graph_rewrites(False)
        if intra_op_threads is not None:
            tf.config.threading.set_intra_op_parallelism_threads(intra_op_threads)


def main():
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    parser.add_argument("--intra-op-threads", type=int, default=None)
    args = parser.parse_args(sys.argv[1:split])
    command = sys.argv[split + 1 :]
    same_as_the_test_process(args.intra_op_threads)
    accumulation = 1
    if "--gradient-accumulation-steps" in command:
        accumulation = int(command[command.index("--gradient-accumulation-steps") + 1])
    from keras_transformer.cli import main as command_line

    sys.argv = ["keras-transformer", *command]
    with in_every_fit(args, accumulation):
        status = command_line()
    sys.exit(status)


if __name__ == "__main__":
    main()
