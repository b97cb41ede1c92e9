"""A training process for the multi-device, multi-worker and kill tests.

    python tests/training/run_training.py OUTPUT_DIR --steps 6 \
        [--logical-cpus 2 --strategy mirrored] [--kill-writing-step 3] [--dropout 0.1] \
        [--without-tensorflow | --numpy-passes] [--intra-op-threads 1] [--results-dir DIR]

Trains the tiny model on the copy task with `keras_transformer.training.train`
and writes the final weights to `<task>-weights.npz` and the loss per epoch
to `<task>-losses.npy` in `--results-dir` (default: OUTPUT_DIR).
`--kill-writing-step k` sends SIGKILL to this process while it writes the
checkpoint of step k (`faults.py`). `--without-tensorflow` runs
as on a machine without TensorFlow (JAX, PyTorch): importing it fails, and
`train()` gets a `pass -> NumPy batches` function instead of the arrays
(`--numpy-passes` alone: that function, with TensorFlow importable).
`--intra-op-threads n` gives TensorFlow's ops n threads (0: its default).
A one-device run can also be `main([OUTPUT_DIR, ...])` in a test's process.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--checkpoint-every", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--accumulation", type=int, default=None)
    parser.add_argument("--strategy", default="auto")
    parser.add_argument("--logical-cpus", type=int, default=0)
    parser.add_argument("--keep", type=int, default=5)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--pad", type=int, default=1)
    parser.add_argument("--tag", default="")
    parser.add_argument("--results-dir", default=None)
    parser.add_argument("--without-tensorflow", action="store_true")
    parser.add_argument("--numpy-passes", action="store_true")
    parser.add_argument("--intra-op-threads", type=int, default=None)
    # The faults' options, parsed before anything imports Keras (and TensorFlow).
    parser.add_argument("--kill-writing-step", type=int, default=0)
    parser.add_argument("--stall-at-step", type=int, default=0)
    parser.add_argument("--file-size-limit-at-step", type=int, default=0)
    args = parser.parse_args(argv)
    if args.without_tensorflow:
        sys.meta_path.insert(0, NoTensorFlow())

    import keras
    import numpy as np

    from tests.training.faults import Faults, same_as_the_test_process

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if args.logical_cpus:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus
            )
    same_as_the_test_process(args.intra_op_threads)

    from keras_transformer.training import select_strategy, train
    from tests.training.tasks import TINY, copy_task

    distributed = select_strategy(args.strategy)  # before any other TF op
    data = copy_task(num_examples=32, pad=bool(args.pad))
    if args.without_tensorflow or args.numpy_passes:
        from tests.training.tasks import numpy_passes

        data = numpy_passes(data, args.batch_size)

    model = train(
        dict(vocab_size=20, **TINY, dropout_rate=args.dropout),
        data,
        args.output_dir,
        validation_data=data,
        train_steps=args.steps,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep,
        batch_size=args.batch_size,
        gradient_accumulation_steps=args.accumulation,
        strategy=distributed,
        tensorboard=False,
        verbose=0,
        callbacks=[Faults(args, args.accumulation or 1)],
    )
    tag = args.tag or distributed.task.replace(":", "")
    results = args.results_dir or args.output_dir
    os.makedirs(results, exist_ok=True)
    np.savez(os.path.join(results, f"{tag}-weights.npz"), *[np.asarray(w) for w in model.get_weights()])
    np.save(os.path.join(results, f"{tag}-losses.npy"), np.asarray(model.history.history["loss"]))


class NoTensorFlow:
    """An import hook under which `import tensorflow` fails, as where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by --without-tensorflow)", name=name)
        return None


if __name__ == "__main__":
    main()
