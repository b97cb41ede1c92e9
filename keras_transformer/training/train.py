"""`train()`: the paper's training recipe with plain `model.fit`.

What it does, in order:

1. Picks the distribution (`strategy.py`): multi-worker from `TF_CONFIG`,
   mirrored over local GPUs, JAX data parallel, or one device.
2. Picks the precision (`precision.py`): bf16 where supported, fp16 with
   loss scaling on older GPUs, fp32 on CPU; XLA where it works.
3. Claims the output directory (`manifest.py`): a new run, the same run
   resumed, or an error for another run's directory, or for a directory
   that another process trains in (its lock, held until `train` returns).
4. Builds and compiles the model in the strategy scope: Adam(0.9, 0.98,
   1e-9) on the paper's schedule in global steps, label smoothing 0.1, and
   gradient accumulation up to about 25k target tokens per step.
5. Runs `model.fit` in epochs of `checkpoint_every` optimizer steps (or
   `train_steps`, if fewer; the last epoch ends at `train_steps`) over the
   repeated dataset, with a checkpoint at every epoch end
   (`callbacks.CheckpointAndRestore`), validation loss every
   `validate_every` epochs, optional BLEU, TensorBoard logs in
   `output_dir/logs`, and a stop at the first non-finite loss. A restart
   with the same arguments resumes at the last intact checkpoint: same
   step, same optimizer and dropout RNG state, same position in the data.

Token budgets: `tokens_per_batch` is the global size of one dataset batch
(all replicas together, as the data pipeline counts it); each of R replicas
gets about `tokens_per_batch / R`. One optimizer step is
`gradient_accumulation_steps` such batches, by default
`round(tokens_per_step / tokens_per_batch)`.

Example:

>>> model = train("base", train_ds, "runs/base", validation_data=valid_ds,
...               vocab_size=37000, tokens_per_batch=6250)  # 4 x 6250 per step
>>> model.history.history["val_loss"]
"""

import contextlib
import dataclasses
import os
import random
from typing import Any, Optional, Union

import keras

from keras_transformer.losses import LabelSmoothedCrossEntropy
from keras_transformer.metrics import MaskedAccuracy
from keras_transformer.models.config import TransformerConfig, architecture_config
from keras_transformer.models.transformer import Transformer
from keras_transformer.training.callbacks import CheckpointAndRestore, NonFiniteLossGuard
from keras_transformer.training.manifest import CHECKPOINTS, claim_output_dir, holding_output_dir
from keras_transformer.training.optimizer import (
    PAPER_TOKENS_PER_STEP,
    accumulation_steps,
    paper_training_optimizer,
)
from keras_transformer.training.precision import resolve_jit_compile, resolve_precision
from keras_transformer.training.strategy import Distributed, select_strategy
from keras_transformer.validation import check_positive, check_positive_number, check_rate


@dataclasses.dataclass
class TrainingOptions:
    """Options of `train()`; the defaults are the paper's base recipe.

    Steps are optimizer (global) steps; one step is
    `gradient_accumulation_steps` batches of the dataset.
    """

    train_steps: int = 100_000  # paper: 100k (base), 300k (big)
    checkpoint_every: int = 1000  # steps per checkpoint (= per fit epoch), at most train_steps
    keep_checkpoints: int = 5  # newest kept; the paper averages 5 (base) / 20 (big)
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    label_smoothing: float = 0.1
    tokens_per_step: int = PAPER_TOKENS_PER_STEP  # target tokens per optimizer step
    tokens_per_batch: Optional[int] = None  # global tokens of one dataset batch
    gradient_accumulation_steps: Optional[int] = None  # None: from the token budgets
    batch_size: Optional[int] = None  # sentences per batch, for NumPy input only
    seed: int = 0
    precision: str = "auto"  # "auto", "float32", "mixed_bfloat16", "mixed_float16"
    jit_compile: Union[bool, str] = "auto"
    strategy: Any = "auto"  # a strategy.KINDS name or a `Distributed`
    validate_every: int = 1  # epochs (checkpoint intervals) between validations
    validation_steps: Optional[int] = None
    tensorboard: bool = True
    verbose: Union[int, str] = "auto"
    overwrite: bool = False

    def __post_init__(self):
        for name in ("train_steps", "checkpoint_every", "keep_checkpoints", "warmup_steps",
                     "tokens_per_step", "validate_every"):
            check_positive(name, getattr(self, name))
        for name in ("tokens_per_batch", "gradient_accumulation_steps", "batch_size", "validation_steps"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        check_rate("label_smoothing", self.label_smoothing)
        check_positive_number("learning_rate_scale", self.learning_rate_scale)

    @property
    def checkpoint_interval(self):
        """Steps per checkpoint (and `fit` epoch): `checkpoint_every`, or
        `train_steps` if that is fewer. The last interval ends at
        `train_steps`, with a checkpoint, however many steps it has left."""
        return min(self.checkpoint_every, self.train_steps)


def model_config(model, vocab_size=None, **overrides):
    """A `TransformerConfig` from a preset name, a config or a dict."""
    if isinstance(model, TransformerConfig):
        return dataclasses.replace(model, **overrides)
    if isinstance(model, dict):
        return TransformerConfig(**{**model, **overrides})
    if vocab_size is None:
        raise ValueError(f"Argument `vocab_size` is required with preset {model!r}.")
    return architecture_config(model, vocab_size=vocab_size, **overrides)


def _as_dataset(data, batch_size, seed, shuffle):
    """A tf.data.Dataset of `((source, target_in), labels)` batches.

    NumPy data are shuffled anew for every pass with a stateless shuffle of
    `(seed, pass)`, so the order is the same in every process, with or
    without a distribution strategy (a seeded `Dataset.shuffle` is not: a
    strategy's dataset rewrite changes its order), and is endless.
    """
    import tensorflow as tf

    if isinstance(data, tf.data.Dataset):
        return data
    if not batch_size:
        raise ValueError("NumPy data needs `batch_size` (sentences per batch).")
    (source, target_in), labels = (tuple(tf.constant(a) for a in data[0]), tf.constant(data[1]))
    count = int(labels.shape[0])
    if shuffle and batch_size > count:  # whole batches only: none would ever come
        raise ValueError(
            f"Argument `batch_size` must be at most the number of examples ({count}). "
            f"Received: batch_size={batch_size}"
        )

    def one_pass(index):
        order = tf.range(count)
        if shuffle:
            pass_seed = tf.stack([tf.constant(seed, tf.int64), index])
            order = tf.random.experimental.stateless_shuffle(order, seed=pass_seed)
        return tf.data.Dataset.from_tensor_slices(order).batch(batch_size, drop_remainder=shuffle)

    def gather(ids):  # ids: (batch,)
        return (tf.gather(source, ids), tf.gather(target_in, ids)), tf.gather(labels, ids)

    if shuffle:
        return tf.data.Dataset.counter().flat_map(one_pass).map(gather)
    batches = one_pass(0).map(gather)
    return batches.apply(tf.data.experimental.assert_cardinality(-(-count // batch_size)))


def _with_length(dataset, validation_steps):
    """A validation `dataset` whose number of batches `fit` knows.

    Over a dataset of unknown length (bucketed batches), Keras ends every
    validation pass with the warning "Your input ran out of data;
    interrupting training", so the batches are counted once here.
    """
    import tensorflow as tf

    length = int(dataset.cardinality())
    if validation_steps is not None or length >= 0:
        return dataset
    if length == tf.data.INFINITE_CARDINALITY:
        raise ValueError(
            "Argument `validation_data` is an endless dataset: pass `validation_steps`. "
            "Received: validation_steps=None"
        )
    count = int(dataset.reduce(0, lambda n, _: n + 1))
    return dataset.apply(tf.data.experimental.assert_cardinality(count))


class _Batches(keras.utils.PyDataset):
    """A fixed list of NumPy batches as a `PyDataset` (validation input)."""

    def __init__(self, batches):
        super().__init__()
        self.batches = batches

    def __len__(self):
        return len(self.batches)

    def __getitem__(self, index):
        return self.batches[index]


def _stream(passes, skip):
    """Endless NumPy batches: `passes(0)`, `passes(1)`, ..., less the first `skip`."""

    def batches():
        index = 0
        while True:
            empty = True
            for batch in passes(index):
                empty = False
                yield batch
            if empty:
                raise ValueError(f"`train_data({index})` yielded no batch.")
            index += 1

    stream = batches()
    for _ in range(skip):  # the batches a resumed run has already consumed
        next(stream)
    return stream


def _run_identity(config, options, precision, accumulation, data):
    identity = {
        "model": dataclasses.asdict(config),
        "precision": precision,
        "optimizer": {
            "name": "adam(0.9, 0.98, 1e-9)",
            "warmup_steps": options.warmup_steps,
            "learning_rate_scale": options.learning_rate_scale,
            "gradient_accumulation_steps": accumulation,
        },
        "label_smoothing": options.label_smoothing,
        "checkpoint_every": options.checkpoint_every,
        "tokens_per_batch": options.tokens_per_batch,
        "batch_size": options.batch_size,
        "seed": options.seed,
    }
    if data is not None:
        identity["data"] = data
    return identity


def build_model(config, precision, options, accumulation, jit_compile, initial_weights=None):
    """The compiled Transformer of `config` (call in the strategy scope),
    with the weights of the `.weights.h5` file `initial_weights` if given."""
    model = Transformer(**dataclasses.asdict(config), dtype=precision)
    if initial_weights is not None:  # before compiling: the file holds no optimizer
        model.load_weights(initial_weights)  # float16 or float32 files: Keras casts on assign
    model.compile(
        optimizer=paper_training_optimizer(
            config.d_model, options.warmup_steps, accumulation, options.learning_rate_scale
        ),
        loss=LabelSmoothedCrossEntropy(options.label_smoothing),
        metrics=[MaskedAccuracy()],
        jit_compile=jit_compile,
    )
    return model


@contextlib.contextmanager
def seeded(seed):
    """Runs the block with the global generators a run draws from seeded
    with `seed`, and puts back their states after it.

    They are Python's `random`, from which Keras draws the default seed of
    every initializer and every dropout layer's `SeedGenerator`, and, on
    PyTorch, torch's generator, from which Keras' dropout draws when its
    layer has no seed of its own. NumPy's global generator, TensorFlow's
    global seed and Keras' global `SeedGenerator` are left alone: nothing
    in a run reads them (the data's order comes from its own seeds).
    """
    state = random.getstate()
    random.seed(seed)
    try:
        if keras.backend.backend() == "torch":
            import torch

            devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(seed)
                yield
        else:
            yield
    finally:
        random.setstate(state)


def _tensorboard(log_dir, log):
    """`[TensorBoard callback]`, or `[]` with a message without `tensorboard`."""
    try:
        import tensorboard  # noqa: F401 - tf.summary needs it
        import tensorflow  # noqa: F401 - Keras' TensorBoard callback writes with tf.summary
    except ImportError as error:
        log(f"Not writing TensorBoard logs: the `{error.name}` package is not installed.")
        return []
    return [keras.callbacks.TensorBoard(log_dir, update_freq="epoch")]


def train(
    model,
    train_data,
    output_dir,
    validation_data=None,
    *,
    vocab_size=None,
    data=None,
    model_overrides=None,
    options=None,
    callbacks=(),
    write_run_files=None,
    initial_weights=None,
    log=print,
    **option_overrides,
):
    """Trains a Transformer with `model.fit`; resumes if interrupted.

    Args:
        model: a preset name (`"tiny"`, `"small"`, `"base"`, `"big"`), a
            `TransformerConfig`, or a dict of `Transformer` arguments.
        train_data: a tf.data.Dataset of `((source_ids, target_input_ids),
            labels)` int32 batches padded with 0 (deterministic: same order
            on every run, e.g. shuffled with a fixed seed), or that tuple of
            NumPy arrays with `batch_size`, or, without TensorFlow, a
            function `pass_index -> iterable of such NumPy batches` (e.g.
            `lambda p: numpy_batches(pairs, tokenizer, seed=p, fixed_shapes=True)`),
            called for pass 0, 1, 2, ... and deterministic in its argument.
        output_dir: str. Holds `run.json`, `checkpoints/` and `logs/`.
        validation_data: optional, like `train_data` (a function is
            called once, with 0).
        vocab_size: int. Required with a preset name.
        data: optional JSON-able description of the data (e.g. the corpus
            and the vocabulary size asked for), recorded in `run.json`:
            a directory of a run on other data is another run's.
        model_overrides: dict of `TransformerConfig` fields.
        options: `TrainingOptions`; keyword arguments override its fields.
        callbacks: extra Keras callbacks (e.g. `BleuCallback`).
        write_run_files: optional callable `(output_dir)`, called when a new
            run claims `output_dir`, before its `run.json` is written: writes
            what a resumed run reads back, e.g. `tokenizer.save`.
        initial_weights: optional `.weights.h5` file the model starts from
            (fine-tuning a preset's `model.weights.h5`); a resumed run
            starts from its last checkpoint instead.
        log: callable for progress messages.

    Returns:
        The trained `Transformer`; `model.history` holds the `fit` history.

    The run seeds the global generators it draws from with `options.seed`,
    and puts back their states when it ends (`seeded`): afterwards the
    process's random generators are as they were before.
    """
    options = dataclasses.replace(options or TrainingOptions(), **option_overrides)
    distributed = options.strategy
    if not isinstance(distributed, Distributed):
        distributed = select_strategy(distributed)  # first: before any TF op
    config = model_config(model, vocab_size, **(model_overrides or {}))
    precision = resolve_precision(options.precision)
    jit_compile = resolve_jit_compile(options.jit_compile, distributed)
    accumulation = options.gradient_accumulation_steps or accumulation_steps(
        options.tokens_per_step, options.tokens_per_batch
    )
    identity = _run_identity(config, options, precision, accumulation, data)
    with seeded(options.seed):
        return _train(config, train_data, output_dir, validation_data, options, distributed, precision, jit_compile,
                      accumulation, identity, callbacks, write_run_files, initial_weights, log)


def _train(config, train_data, output_dir, validation_data, options, distributed, precision, jit_compile,
           accumulation, identity, callbacks, write_run_files, initial_weights, log):
    """`train`'s run, once its options are resolved, with its generators seeded."""
    with distributed.scope():
        # Built first, so that an invalid config fails before the output
        # directory is claimed for it.
        model = build_model(config, precision, options, accumulation, jit_compile, initial_weights)
    if not callable(train_data):  # checks `batch_size` before the directory is claimed
        train_data = _as_dataset(train_data, options.batch_size, options.seed, shuffle=True)
    # One process trains in a directory at a time: the chief, which writes.
    with holding_output_dir(output_dir) if distributed.is_chief else contextlib.nullcontext():
        status = claim_output_dir(
            output_dir, identity, options.overwrite, write=distributed.is_chief, write_run_files=write_run_files
        )
        log(
            f"Training {status} run in {output_dir}: {distributed.describe()}, {precision}, "
            f"jit_compile={jit_compile}, {accumulation} batch(es) per step"
            + (
                f", {options.tokens_per_batch} tokens per batch "
                f"({options.tokens_per_batch // distributed.num_replicas} per replica)"
                if options.tokens_per_batch
                else ""
            )
        )

        restore = CheckpointAndRestore(
            os.path.join(output_dir, CHECKPOINTS),
            options.checkpoint_interval,
            batches_per_step=accumulation,
            keep=options.keep_checkpoints,
            write=distributed.is_chief,
            log=log,
            train_steps=options.train_steps,
        )
        if callable(train_data):
            dataset = _stream(train_data, restore.consumed_batches)
        else:
            dataset = train_data.repeat().skip(restore.consumed_batches)
        if callable(validation_data):
            validation_data = _Batches(list(validation_data(0)))
        elif validation_data is not None:
            validation_data = _as_dataset(validation_data, options.batch_size, options.seed, shuffle=False)
            validation_data = _with_length(validation_data, options.validation_steps)
        all_callbacks = [restore, NonFiniteLossGuard(accumulation, log=log), *callbacks]
        if options.tensorboard and distributed.is_chief:
            all_callbacks += _tensorboard(os.path.join(output_dir, "logs"), log)
        model.fit(
            dataset,
            epochs=restore.epochs,  # the last one stops at train_steps
            steps_per_epoch=options.checkpoint_interval * accumulation,
            initial_epoch=restore.initial_epoch,
            validation_data=validation_data,
            validation_steps=options.validation_steps,
            validation_freq=options.validate_every,
            callbacks=all_callbacks,
            verbose=options.verbose,
            shuffle=False,  # the dataset order is part of the run
        )
    return model
