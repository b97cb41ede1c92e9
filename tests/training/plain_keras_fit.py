"""Plain Keras on one device or under a distribution strategy, as a user writes it.

    python tests/training/plain_keras_fit.py OUT_DIR --strategy mirrored [--run numpy,ours] [--run dataset,stock] \
        [--replica-batches TOKENIZER_DIR]

For each `--run INPUT,LOSS` (default: numpy,ours), builds the tiny
Transformer in the strategy's scope, compiles it with the paper's optimizer,
`LabelSmoothedCrossEntropy` and `MaskedAccuracy` (LOSS `ours`) or SGD and a
stock `SparseCategoricalCrossentropy` (`stock`), then runs `fit`, `evaluate`
and `predict` on NumPy arrays or a tf.data.Dataset (INPUT) with no helper of
this package. Writes the per-epoch losses, the evaluation, the predictions
and the final weights to OUT_DIR/INPUT-LOSS.npz. The runs share the process
(and its strategy): each starts from the same seed.

`--replica-batches TOKENIZER_DIR` (with `mirrored`): after the runs, makes
the `make_dataset` batches of 300 Tatoeba pairs for the strategy's replicas
with the tokenizer saved there, distributes them with the strategy, and
writes the shape of each replica's source batch, and the pipeline's counts,
to OUT_DIR/replica-batches.json (test_plain_keras.py's pipeline test).

Strategies: `one-device`, `mirrored` (two logical CPUs) and `data-parallel`
(JAX, two host devices: `XLA_FLAGS=--xla_force_host_platform_device_count=2`).
Logical devices and `XLA_FLAGS` are fixed when TensorFlow or JAX starts,
which is why each distributed case is a process of its own; the one-device
run can also be `main([OUT.npz, ...])` in a TensorFlow process.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

BATCH = 16  # global: under a strategy each of the 2 replicas gets 8 sentences
EPOCHS = 3


def paired_copy_task(batches, seed=0):
    """Copy-task batches whose two halves hold the same number of tokens.

    Under a strategy each replica takes the mean over its own half of a
    global batch, and Keras averages those means; with equal token counts
    that is the one-device mean over the whole batch. The second half of
    each batch is the first with its words renamed.
    """
    import numpy as np

    from keras_transformer.training.synthetic import FIRST_WORD, copy_task

    half = BATCH // 2
    (source, target_in), labels = copy_task(batches * half, length=6, vocab_size=32, seed=seed)
    rename = np.arange(32)
    rename[FIRST_WORD:] = np.random.default_rng(seed).permutation(np.arange(FIRST_WORD, 32))
    parts = []
    for array in (source, target_in, labels):
        blocks = [np.concatenate([array[i : i + half], rename[array[i : i + half]]]) for i in range(0, len(array), half)]
        parts.append(np.concatenate(blocks).astype("int32"))
    source, target_in, labels = parts
    return (source, target_in), labels


def strategy_scope(kind):
    """`(scope, replicas)`: `scope()` is where to build a model, and `replicas`
    how many replicas share a batch."""
    import contextlib

    import keras

    if kind == "one-device":
        return contextlib.nullcontext, 1
    if kind == "data-parallel":
        distribution = keras.distribution.DataParallel()
        keras.distribution.set_distribution(distribution)
        return contextlib.nullcontext, distribution.device_mesh.shape[0]
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    return strategy.scope, strategy.num_replicas_in_sync


def run_kind(text):
    """`INPUT,LOSS` -> `(INPUT, LOSS)`: INPUT `numpy` or `dataset`, LOSS `ours` or `stock`."""
    kind = tuple(text.split(","))
    if len(kind) != 2 or kind[0] not in ("numpy", "dataset") or kind[1] not in ("ours", "stock"):
        raise argparse.ArgumentTypeError(f"expected INPUT,LOSS (numpy|dataset,ours|stock): {text!r}")
    return kind


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("output_dir")
    parser.add_argument("--strategy", default="one-device",
                        choices=["one-device", "mirrored", "data-parallel"])
    parser.add_argument("--run", type=run_kind, action="append", dest="runs")
    parser.add_argument("--replica-batches", metavar="TOKENIZER_DIR")
    args = parser.parse_args(argv)

    scope, replicas = strategy_scope(args.strategy)  # before any other TensorFlow op
    os.makedirs(args.output_dir, exist_ok=True)
    for data, loss in args.runs or [("numpy", "ours")]:
        fit(os.path.join(args.output_dir, f"{data}-{loss}.npz"), scope, replicas, data, loss)
    if args.replica_batches:
        replica_batches(os.path.join(args.output_dir, "replica-batches.json"), args.replica_batches, scope)


def fit(output, scope, replicas, data, loss):
    import keras
    import numpy as np

    from keras_transformer import LabelSmoothedCrossEntropy, MaskedAccuracy, Transformer, paper_optimizer

    keras.utils.set_random_seed(0)
    (source, target_in), labels = paired_copy_task(batches=4)
    with scope():
        model = Transformer.from_architecture("tiny", vocab_size=32, dropout_rate=0.0, num_layers=1, max_length=16)
        if loss == "ours":
            model.compile(optimizer=paper_optimizer(128, warmup_steps=4), loss=LabelSmoothedCrossEntropy(),
                          metrics=[MaskedAccuracy()])
        else:  # a user's plain script: SGD and Keras' own loss
            model.compile(optimizer=keras.optimizers.SGD(0.1),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    if data == "numpy":
        history = model.fit((source, target_in), labels, batch_size=BATCH, epochs=EPOCHS, shuffle=False, verbose=0)
        evaluation = model.evaluate((source, target_in), labels, batch_size=BATCH, verbose=0)
        predictions = model.predict((source, target_in), batch_size=BATCH, verbose=0)
    else:
        import tensorflow as tf

        dataset = tf.data.Dataset.from_tensor_slices(((source, target_in), labels)).batch(BATCH)
        history = model.fit(dataset, epochs=EPOCHS, verbose=0)
        evaluation = model.evaluate(dataset, verbose=0)
        predictions = model.predict(dataset.map(lambda x, y: (x,)), verbose=0)
    np.savez(
        output,
        replicas=replicas,
        losses=np.asarray(history.history["loss"]),
        evaluation=np.asarray(evaluation),
        predictions=np.asarray(predictions),
        weights=np.concatenate([np.ravel(w) for w in model.get_weights()]),
    )


def replica_batches(output, tokenizer_dir, scope):
    """The shapes of each replica's part of the pipeline's batches, as the
    strategy of `scope` distributes them, and the pipeline's counts."""
    import json

    import tensorflow as tf

    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer, make_dataset

    with scope():
        strategy = tf.distribute.get_strategy()
    tokenizer = SubwordTokenizer.load(tokenizer_dir)
    dataset, report = make_dataset(datasets.load("tatoeba_en_fr", "test")[:300], tokenizer, 512, 32,
                                   num_replicas=strategy.num_replicas_in_sync, log=None)
    shapes = [[list(part.shape) for part in strategy.experimental_local_results(source)]
              for (source, _), _ in strategy.experimental_distribute_dataset(dataset)]
    with open(output, "w") as f:
        json.dump({"shapes": shapes, "kept": report.kept, "remainder_per_pass": report.remainder_per_pass}, f)


if __name__ == "__main__":
    main()
