"""`keras-transformer train`: train a Transformer with `model.fit`; rerun to resume.

    keras-transformer train --train-file my_train.tsv --valid-file my_valid.tsv \
        --architecture small --output-dir runs/mine                  # your own data: source<TAB>target
    keras-transformer train --train-file train.en train.fr --valid-file valid.en valid.fr \
        --architecture small --output-dir runs/mine                  # or aligned files, a sentence a line
    keras-transformer train --from-preset tatoeba_en_fr --train-file my_pairs.tsv \
        --output-dir runs/my_en_fr --train-steps 500 --checkpoint-every 100 --warmup-steps 100
    keras-transformer train --corpus tatoeba_en_fr --architecture small --output-dir runs/small
    keras-transformer train --corpus synthetic-copy --architecture tiny --output-dir /tmp/run \
        --train-steps 4 --checkpoint-every 2 --fit-verbose 0

The data is a shipped corpus (`--corpus`, and `--corpus-file` for its full
file) or your own files (`--train-file`, `--valid-file`: one TSV file or
source and target files, plain or .gz). Your files are read whole before
the run starts, and a bad line stops it with its file and line, writing
nothing, unless `--skip-bad-lines`. The subword vocabulary is learned from
the training pairs with byte fallback (no character is lost), or with
`--from-preset` is the preset's, whose weights the run starts from.

The run directory gets run.json, checkpoints/, logs/ and tokenizer.model,
and at the end the preset files (config.json, model.weights.h5 with the
last step's weights, metadata.json): `Translator.from_preset(RUN_DIR)`,
`translate`, `evaluate` and `export` take it as it is, and
`keras-transformer preset RUN_DIR` writes the mean of its last checkpoints
as another preset. Without TensorFlow (a JAX or PyTorch machine) the data
is batched with NumPy and TensorBoard logs are not written.
"""

import ast
import contextlib
import dataclasses
import os

from keras_transformer.data.lengths import TOKENS_PER_BATCH

NAME = "train"
HELP = "Train a Transformer on a shipped corpus or your own files; rerun to resume an interrupted run."

SYNTHETIC_CORPORA = ("synthetic-copy", "synthetic-reverse")
DEFAULT_ARCHITECTURE = "base"


def add_arguments(p):
    data = p.add_argument_group("data (one of --corpus and --train-file)")
    data.add_argument("--corpus", default=None,
                      help=f"a shipped corpus (keras_transformer.datasets), or one of {SYNTHETIC_CORPORA}")
    data.add_argument("--corpus-file", default=None,
                      help="the corpus's full .tsv(.gz) file to train on instead of its shipped training split "
                           "(e.g. tatoeba_en_fr.tsv.gz); the shipped validation and test sources are left out")
    data.add_argument("--train-file", nargs="+", default=None, metavar="FILE",
                      help="your training pairs: a TSV file (source<TAB>target), or a source and a target "
                           "file aligned line by line")
    data.add_argument("--valid-file", nargs="+", default=None, metavar="FILE",
                      help="your validation pairs, in the same form (default: no validation)")
    data.add_argument("--skip-bad-lines", action="store_true",
                      help="skip and count bad lines of --train-file and --valid-file instead of stopping at the first")
    p.add_argument("--output-dir", required=True, help="run directory: run.json, checkpoints/, logs/, the preset")
    p.add_argument("--architecture", default=None, choices=["tiny", "small", "base", "big"],
                   help=f"the untrained model's size (default: {DEFAULT_ARCHITECTURE})")
    p.add_argument("--from-preset", default=None, metavar="PRESET",
                   help="fine-tune: start from a preset's weights (a shipped name or a preset directory), with "
                        "its architecture and tokenizer")
    p.add_argument("--vocab-size", type=int, default=None,
                   help="subword vocabulary learned from the training pairs (default 8000; synthetic: 20)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a TransformerConfig field, e.g. --set dropout_rate=0.3")
    p.add_argument("--train-steps", type=int, default=100_000, help="optimizer steps (paper: 100k base)")
    p.add_argument("--checkpoint-every", type=int, default=1000,
                   help="steps between checkpoints, at most --train-steps; the last step is always checkpointed")
    p.add_argument("--keep-checkpoints", type=int, default=5, help="the newest checkpoints kept on disk")
    p.add_argument("--warmup-steps", type=int, default=4000, help="steps of the learning rate's linear warm-up")
    p.add_argument("--learning-rate-scale", type=float, default=1.0,
                   help="multiplies the paper's learning rate schedule")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="the paper's eps_ls")
    p.add_argument("--tokens-per-step", type=int, default=25_000,
                   help="target tokens per optimizer step (the paper's 25k), reached by accumulating batches")
    p.add_argument("--tokens-per-batch", type=int, default=TOKENS_PER_BATCH,
                   help="global tokens per batch, all replicas together")
    p.add_argument("--gradient-accumulation-steps", type=int, default=None,
                   help="batches per optimizer step (default: round(tokens-per-step / tokens-per-batch), 6 "
                        "with the defaults; 1 trains on one batch a step)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch (synthetic corpora)")
    p.add_argument("--precision", default="auto",
                   choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
                   help="auto: mixed_bfloat16 where the device supports it, else mixed_float16 on a GPU, "
                        "float32 on a CPU")
    p.add_argument("--strategy", default="auto",
                   choices=["auto", "one-device", "mirrored", "multi-worker", "data-parallel"],
                   help="auto: multi-worker when TF_CONFIG names several tasks, else all local GPUs (JAX: all "
                        "devices), else one device")
    p.add_argument("--jit-compile", default="auto", choices=["auto", "on", "off"],
                   help="XLA; auto: on with JAX and on one TensorFlow GPU, off on a CPU")
    p.add_argument("--seed", type=int, default=0, help="the seed of the weights, the data order and dropout")
    p.add_argument("--validate-every", type=int, default=1, help="checkpoints between validations")
    p.add_argument("--overwrite", action="store_true", help="replace another run in --output-dir")
    p.add_argument("--no-tensorboard", action="store_true", help="write no TensorBoard logs in --output-dir/logs")
    p.add_argument("--fit-verbose", default="auto", choices=["auto", "0", "1", "2"],
                   help="Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch")


def run(args):
    from keras_transformer.models.transformer import Transformer
    from keras_transformer.training import (
        StalledTrainingWarning,
        TrainingOptions,
        frequency_loss,
        model_config,
        select_strategy,
        train,
    )
    from keras_transformer.training.manifest import check_output_dir, holding_output_dir

    check_data_arguments(args)
    synthetic = args.corpus in SYNTHETIC_CORPORA
    base = _base_model(args)
    vocab_size = base.transformer_config.vocab_size if base else _vocab_size(args)
    overrides = parse_overrides(args.overrides)
    data = _data_identity(args, vocab_size)  # part of the run's identity
    # The options, the model config and the directory are checked before
    # any data is read, a vocabulary learned or a file written.
    options = TrainingOptions(
        strategy=select_strategy(args.strategy),  # first: before any TF op
        train_steps=args.train_steps,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        warmup_steps=args.warmup_steps,
        learning_rate_scale=args.learning_rate_scale,
        label_smoothing=args.label_smoothing,
        tokens_per_step=args.tokens_per_step,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        precision=args.precision,
        jit_compile={"auto": "auto", "on": True, "off": False}[args.jit_compile],
        seed=args.seed,
        validate_every=args.validate_every,
        overwrite=args.overwrite,
        tensorboard=not args.no_tensorboard,
        verbose=args.fit_verbose if args.fit_verbose == "auto" else int(args.fit_verbose),
        **({"batch_size": args.batch_size} if synthetic else {"tokens_per_batch": args.tokens_per_batch}),
    )
    config = model_config(base.transformer_config if base else args.architecture or DEFAULT_ARCHITECTURE,
                          vocab_size, **overrides)
    checked = Transformer(**dataclasses.asdict(config))  # checks the config
    if base is not None:
        check_preset_overrides(base, checked, args)
    if not synthetic:
        check_tokens_per_batch(args.tokens_per_batch, config.max_length, options.strategy.num_replicas)
    # One process at a time trains in a directory (the chief, which writes).
    with holding_output_dir(args.output_dir) if options.strategy.is_chief else contextlib.nullcontext():
        same_data = check_output_dir(args.output_dir, {"data": data, "seed": args.seed}, args.overwrite, partial=True)
        train_data, valid_data, tokenizer, labels = corpus_datasets(
            args, vocab_size, reuse_tokenizer=same_data == "resume", max_length=config.max_length)
        if tokenizer is not None and same_data == "resume" and not os.path.exists(tokenizer_path(args.output_dir)):
            tokenizer.save(args.output_dir)  # a resumed run whose tokenizer was removed: learned again alike
        if tokenizer is not None:  # a small corpus may give fewer pieces than asked
            config = dataclasses.replace(config, vocab_size=tokenizer.vocab_size)
        plateau = frequency_loss(labels, config.target_vocab_size or config.vocab_size, options.label_smoothing)
        model = train(
            config,
            train_data,
            args.output_dir,
            validation_data=valid_data,
            data=data,
            options=options,
            callbacks=[StalledTrainingWarning(plateau, options.warmup_steps)],
            initial_weights=_preset_weights(args.from_preset),
            write_run_files=tokenizer.save if tokenizer else None,  # before run.json: see claim_output_dir
        )
        save_run_preset(model, args.output_dir, data)
    what = "a preset" if tokenizer else "config.json and model.weights.h5 (a synthetic corpus: no tokenizer)"
    print(f"Saved the last weights: {args.output_dir} is {what}")
    return 0


def check_preset_overrides(base, model, args):
    """Raises `ValueError` unless `model`, the preset `base` with `--set`,
    has the preset's weights to start from: `--set` may change dropout,
    not the shapes of the weights."""
    if [tuple(w.shape) for w in model.weights] != [tuple(w.shape) for w in base.weights]:
        given = " ".join(f"--set {pair}" for pair in args.overrides)
        raise ValueError(
            f"--set changes the shapes of the weights of --from-preset {args.from_preset!r}, which the run starts "
            "from: with --from-preset, --set takes only fields that keep them (dropout_rate, "
            f"attention_dropout_rate). Received: {given}"
        )


def check_tokens_per_batch(tokens_per_batch, max_length, num_replicas):
    """Raises `ValueError` unless a batch of `--tokens-per-batch` holds a
    pair of the longest length trained on (the model's `max_length`, at
    most `training_data.MAX_LENGTH`) on each replica."""
    from keras_transformer.data.lengths import batch_sizes
    from keras_transformer.training.training_data import MAX_LENGTH

    longest = min(MAX_LENGTH, max_length)
    try:
        batch_sizes([longest], tokens_per_batch, num_replicas)
    except ValueError:
        raise ValueError(
            f"--tokens-per-batch {tokens_per_batch} cannot hold {num_replicas} pair(s) of {longest} tokens, the "
            f"longest trained on: raise --tokens-per-batch to {longest * num_replicas} or more, or train on "
            f"shorter pairs with --set max_length=N. Received: --tokens-per-batch {tokens_per_batch}"
        ) from None


def save_run_preset(model, output_dir, data):
    """Writes the run's last weights as the preset files of `output_dir`
    (a disk too full for them: an `OSError` before HDF5 writes a byte)."""
    from keras_transformer.atomic_files import check_room
    from keras_transformer.models.presets import save_model
    from keras_transformer.training.checkpoints import variables_bytes
    from keras_transformer.training.inference_model import inference_model

    model = inference_model(model)
    check_room(output_dir, variables_bytes(model.weights), f"the run's last weights in {output_dir}")
    save_model(model, output_dir, metadata={"data": data})


def check_data_arguments(args):
    """Raises `ValueError` for data arguments that do not go together."""
    if (args.corpus is None) == (args.train_file is None):
        raise ValueError(
            "Give one of --corpus (a shipped corpus) and --train-file (your own files). "
            f"Received: --corpus={args.corpus!r}, --train-file={args.train_file!r}"
        )
    if args.corpus is not None:
        check_corpus(args.corpus)
        if args.valid_file is not None or args.skip_bad_lines:
            raise ValueError(
                "--valid-file and --skip-bad-lines are for your own files (--train-file). "
                f"Received: --corpus={args.corpus!r}"
            )
        if args.corpus_file is not None:
            check_corpus_file(args)
    for name in ("train_file", "valid_file"):
        files = getattr(args, name)
        flag = "--" + name.replace("_", "-")
        if files is not None and len(files) > 2:
            raise ValueError(f"{flag} takes a TSV file or a source and a target file. Received: {flag} {files}")
        for path in files or []:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{flag}: no such file. Received: {path!r}")
    if args.from_preset is not None:
        from keras_transformer.translation.marian import is_marian

        if is_marian(args.from_preset):
            raise ValueError(f"--from-preset takes a preset: import the Marian model once with `keras-transformer "
                             f"import {args.from_preset} --output DIR` and fine-tune DIR. "
                             f"Received: --from-preset={args.from_preset!r}")
        if args.corpus in SYNTHETIC_CORPORA:
            raise ValueError(f"--from-preset needs text data, not a synthetic corpus. Received: --corpus={args.corpus!r}")
        for flag, value in (("--architecture", args.architecture), ("--vocab-size", args.vocab_size)):
            if value is not None:
                raise ValueError(
                    f"{flag} comes from the preset with --from-preset (its model and its tokenizer). "
                    f"Received: --from-preset={args.from_preset!r}, {flag}={value!r}"
                )
        if os.path.isdir(args.from_preset) and os.path.isdir(args.output_dir) and os.path.samefile(
                args.from_preset, args.output_dir):
            raise ValueError(
                "--output-dir is the preset that --from-preset starts from, whose files the run would replace: "
                f"train into a directory of its own. Received: --from-preset={args.from_preset!r}, "
                f"--output-dir={args.output_dir!r}"
            )


def _base_model(args):
    """The untrained model of `--from-preset` (its config, vocabulary size), or None."""
    if args.from_preset is None:
        return None
    from keras_transformer.models import presets

    return presets.load_model(args.from_preset, load_weights=False)


def _preset_weights(preset):
    """The weights file a fine-tuning run starts from, or None."""
    if preset is None:
        return None
    from keras_transformer.models import presets

    return os.path.join(presets.preset_directory(preset), presets.WEIGHTS_FILE)


def _data_identity(args, vocab_size):
    """What the run's data is, for its manifest: a run on other data is
    another run. Your files are named with their size and SHA-256."""
    from keras_transformer.training.checkpoints import file_sha256

    if args.corpus is not None:
        data = {"corpus": args.corpus, "vocab_size": vocab_size}
        if args.corpus_file is not None:
            data["corpus_file"] = [os.path.basename(args.corpus_file), file_sha256(args.corpus_file)]
    else:
        data = {"vocab_size": vocab_size}
        for name in ("train_file", "valid_file"):  # an edited file is other data, whatever its name and size
            files = getattr(args, name) or []
            data[name] = [[os.path.basename(path), os.path.getsize(path), file_sha256(path)] for path in files]
        if args.skip_bad_lines:
            data["skip_bad_lines"] = True
    if args.from_preset is not None:
        data["from_preset"] = args.from_preset
    return data


def check_corpus(corpus):
    """Raises `ValueError` unless `corpus` is shipped or synthetic."""
    from keras_transformer import datasets

    known = sorted(datasets.CORPORA) + list(SYNTHETIC_CORPORA)
    if corpus not in known:
        raise ValueError(f"Argument `--corpus` must be one of {known}. Received: --corpus={corpus!r}")


def check_corpus_file(args):
    """Raises unless `--corpus-file` is a readable file of a corpus that has a full file."""
    from keras_transformer import datasets

    if args.corpus in SYNTHETIC_CORPORA or args.corpus not in datasets.FULL_FILES:
        raise ValueError(
            f"Argument `--corpus-file` is for corpora shipped as a split of a larger file "
            f"({sorted(datasets.FULL_FILES)}). Received: --corpus={args.corpus!r}"
        )
    if not os.path.isfile(args.corpus_file):
        raise FileNotFoundError(f"Argument `--corpus-file`: no such file. Received: {args.corpus_file!r}")


def parse_overrides(pairs):
    """`--set FIELD=VALUE` pairs as a dict of model config fields (values as Python literals).

    >>> parse_overrides(["dropout_rate=0.3", "num_layers=2"])
    {'dropout_rate': 0.3, 'num_layers': 2}
    """
    from keras_transformer.models.config import TransformerConfig

    fields = sorted(f.name for f in dataclasses.fields(TransformerConfig) if f.name != "vocab_size")
    overrides = {}
    for pair in pairs:
        field, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--set expects FIELD=VALUE. Received: {pair!r}")
        if field == "vocab_size":
            raise ValueError("--set cannot set vocab_size: use --vocab-size.")
        if field not in fields:
            raise ValueError(f"--set: unknown model field {field!r}. Expected one of {fields}.")
        try:
            overrides[field] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[field] = value
    return overrides


def _vocab_size(args):
    """The vocabulary size asked for: `--vocab-size`, or 20 (synthetic) or 8000."""
    from keras_transformer.training.training_data import VOCAB_SIZE

    synthetic = args.corpus in SYNTHETIC_CORPORA
    if args.vocab_size is None:
        return 20 if synthetic else VOCAB_SIZE
    minimum = 4 if synthetic else 8  # synthetic tokens are ids 3 .. vocab_size - 1
    if args.vocab_size < minimum:
        raise ValueError(
            f"Argument `vocab_size` must be >= {minimum} for corpus {args.corpus!r}. "
            f"Received: vocab_size={args.vocab_size}"
        )
    return args.vocab_size


def tokenizer_path(output_dir):
    """Where a run in `output_dir` keeps its subword vocabulary."""
    return os.path.join(output_dir, "tokenizer.model")


def corpus_datasets(args, vocab_size, reuse_tokenizer=False, max_length=None):
    """`(train, validation, tokenizer, labels)` for the run's data; `labels`:
    target rows of up to `FREQUENCY_SAMPLE` training pairs, for
    `keras_transformer.training.plateau.frequency_loss`.

    Synthetic corpora are NumPy arrays (batched by `--batch-size`), without
    a tokenizer. Text goes through `keras_transformer.training.training_data`,
    batched by `--tokens-per-batch` tokens globally. The tokenizer is the
    preset's with `--from-preset`; with `reuse_tokenizer`, the run's
    `tokenizer.model`, if any; else learned from the training pairs. Pairs
    over `training_data.MAX_LENGTH` tokens, or the model's `max_length` if
    shorter, are left out.
    """
    if args.corpus in SYNTHETIC_CORPORA:
        from keras_transformer.training.synthetic import copy_task

        reverse = args.corpus == "synthetic-reverse"
        train = copy_task(256, vocab_size=vocab_size, seed=args.seed, reverse=reverse)
        valid = copy_task(64, vocab_size=vocab_size, seed=args.seed + 1, reverse=reverse)
        return train, valid, None, train[1]
    from keras_transformer.data import SubwordTokenizer
    from keras_transformer.training.training_data import MAX_LENGTH, corpus_pairs, read_files, training_data

    path = tokenizer_path(args.output_dir)
    if args.from_preset is not None:
        tokenizer = SubwordTokenizer.from_preset(args.from_preset)
    elif reuse_tokenizer and os.path.exists(path):
        tokenizer = SubwordTokenizer.load(path)
    else:
        tokenizer = None
    max_length = min(MAX_LENGTH, max_length or MAX_LENGTH)
    if args.corpus is not None:
        train_pairs, valid_pairs = corpus_pairs(args.corpus, args.corpus_file)
    else:
        train_pairs = read_files(args.train_file, args.skip_bad_lines)
        valid_pairs = read_files(args.valid_file, args.skip_bad_lines) if args.valid_file else None
    train, valid, tokenizer = training_data(train_pairs, valid_pairs, args.tokens_per_batch, args.seed, vocab_size,
                                            max_length, tokenizer)
    return train, valid, tokenizer, target_labels(train_pairs, tokenizer, args.seed)


# Training pairs whose targets give the token frequencies: enough for a
# vocabulary's common pieces, a fraction of a second to encode.
FREQUENCY_SAMPLE = 10_000


def target_labels(pairs, tokenizer, seed):
    """The label rows of up to `FREQUENCY_SAMPLE` of `pairs`, drawn with `seed`."""
    import numpy as np

    from keras_transformer.tokens import pack_target, split_target

    rows = np.random.default_rng(seed).permutation(len(pairs))[:FREQUENCY_SAMPLE]
    return [split_target(pack_target(ids))[1] for ids in tokenizer.encode_target([pairs[i][1] for i in rows])]
