"""The `keras-transformer` command line: `train`, `average-checkpoints`,
and (in `cli_serving`) `export`, `translate`, `serve`.

    python -m keras_transformer.cli train --corpus NAME --preset base \
        --output-dir runs/base --tokens-per-batch 6250
    python -m keras_transformer.cli average-checkpoints runs/base/checkpoints \
        --last 5 --output runs/base/average.weights.h5

Each subcommand is a `run(args)` function registered with
`@command(name, help, add_arguments)`. New subcommands (`evaluate`, `translate`, `export`,
`serve`) register the same way and appear in `--help`.

Example:

>>> main(["train", "--corpus", "synthetic-copy", "--preset", "tiny",
...       "--output-dir", "/tmp/run", "--train-steps", "4", "--checkpoint-every", "2"])
0
"""

import argparse
import os
import sys

COMMANDS = {}  # name -> (help, add_arguments, run)


def command(name, help, add_arguments):
    """Registers the decorated `run(args)` as subcommand `name`.

    `add_arguments(parser)` adds its arguments to its own sub-parser.
    """

    def register(run):
        COMMANDS[name] = (help, add_arguments, run)
        return run

    return register


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-transformer",
        description='The Transformer of "Attention Is All You Need" in Keras 3.',
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.commands = {}
    for name, (help_text, add_arguments, run) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        add_arguments(sub)
        sub.set_defaults(run=run, command=name)
        parser.commands[name] = sub
    return parser


def parse_arguments(argv=None):
    """The parsed command line; a command's words may come after its options.

    `translate MODEL --batch-size 8 "Hi."` is refused by a plain
    `parse_args` (a `nargs="*"` positional is consumed, empty, before the
    options), so the command's own parser reads its part intermixed.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    name = parser.parse_known_args(argv)[0].command
    return parser.commands[name].parse_intermixed_args(argv[argv.index(name) + 1 :])


def main(argv=None):
    """Runs the command line `argv` (default `sys.argv[1:]`); returns 0 on success.

    As the process's command line, a bad argument or a missing, existing or
    unreadable file (`ValueError`, `OSError`) ends the process with a
    one-line message on stderr and status 1, not a traceback. Called with
    `argv`, as from Python, the exception is raised as it is.
    """
    args = parse_arguments(argv)
    try:
        return args.run(args) or 0
    except (ValueError, OSError) as error:
        if argv is not None:
            raise
        raise SystemExit(f"keras-transformer {args.command}: error: {error}") from error


# ---------------------------------------------------------------- train

SYNTHETIC_CORPORA = ("synthetic-copy", "synthetic-reverse")


def _train_arguments(p):
    p.add_argument("--corpus", required=True,
                   help=f"corpus name for keras_transformer.datasets.load, or one of {SYNTHETIC_CORPORA}")
    p.add_argument("--output-dir", required=True, help="run directory: run.json, checkpoints/, logs/")
    p.add_argument("--preset", default="base", choices=["tiny", "small", "base", "big"])
    p.add_argument("--vocab-size", type=int, default=None,
                   help="subword vocabulary learned from the corpus (default 8000; synthetic: 20)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                   help="override a TransformerConfig field, e.g. --set dropout_rate=0.3")
    p.add_argument("--train-steps", type=int, default=100_000, help="optimizer steps (paper: 100k base)")
    p.add_argument("--checkpoint-every", type=int, default=1000, help="steps between checkpoints")
    p.add_argument("--keep-checkpoints", type=int, default=5)
    p.add_argument("--warmup-steps", type=int, default=4000)
    p.add_argument("--learning-rate-scale", type=float, default=1.0)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--tokens-per-step", type=int, default=25_000, help="target tokens per optimizer step")
    p.add_argument("--tokens-per-batch", type=int, default=4096,
                   help="global tokens per batch, all replicas together")
    p.add_argument("--gradient-accumulation-steps", type=int, default=None,
                   help="default: round(tokens-per-step / tokens-per-batch)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch (synthetic corpora)")
    p.add_argument("--precision", default="auto",
                   choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"])
    p.add_argument("--strategy", default="auto",
                   choices=["auto", "one-device", "mirrored", "multi-worker", "data-parallel"])
    p.add_argument("--jit-compile", default="auto", choices=["auto", "on", "off"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--validate-every", type=int, default=1, help="checkpoints between validations")
    p.add_argument("--overwrite", action="store_true", help="replace another run in --output-dir")
    p.add_argument("--no-tensorboard", action="store_true")
    p.add_argument("--verbose", default="auto", choices=["auto", "0", "1", "2"], help="Keras fit verbosity")


def _parse_overrides(pairs):
    import ast
    import dataclasses

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
    synthetic = args.corpus in SYNTHETIC_CORPORA
    if args.vocab_size is None:
        return 20 if synthetic else 8000
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


def corpus_datasets(args, vocab_size, reuse_tokenizer=False):
    """`(train, validation, tokenizer)` for `args.corpus`.

    Synthetic corpora are NumPy arrays (batched by `--batch-size`), without
    a tokenizer. Real corpora go through the data pipeline
    (`keras_transformer.datasets.load` and `keras_transformer.data`),
    batched by `--tokens-per-batch` tokens globally; see `read_corpus`.
    With `reuse_tokenizer`, the run's `tokenizer.model`, if any, is loaded.
    """
    if args.corpus in SYNTHETIC_CORPORA:
        from keras_transformer.training.synthetic import copy_task

        reverse = args.corpus == "synthetic-reverse"
        train = copy_task(256, vocab_size=vocab_size, seed=args.seed, reverse=reverse)
        valid = copy_task(64, vocab_size=vocab_size, seed=args.seed + 1, reverse=reverse)
        return train, valid, None
    path = tokenizer_path(args.output_dir)
    return read_corpus(
        args.corpus, args.tokens_per_batch, args.seed, vocab_size=vocab_size,
        tokenizer_path=path if reuse_tokenizer and os.path.exists(path) else None,
    )


def read_corpus(name, tokens_per_batch, seed, vocab_size=8000, max_length=128, tokenizer_path=None):
    """`(train_ds, valid_ds, tokenizer)` of a shipped corpus, via the data pipeline.

    The shared subword vocabulary is loaded from `tokenizer_path` (a
    resumed run's), or else learned from the training split with
    `vocab_size` pieces. Training batches are shuffled with `seed` (the
    same order on every run, which resume relies on) and repeat;
    `tokens_per_batch` is global.
    """
    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer, make_dataset

    try:
        train_pairs = datasets.load(name, "train")
        valid_pairs = datasets.load(name, "validation")
    except ValueError as error:
        raise SystemExit(f"{error} (or one of {SYNTHETIC_CORPORA})")
    if tokenizer_path:
        tokenizer = SubwordTokenizer.load(tokenizer_path)
    else:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], vocab_size, seed=seed)
    train, _ = make_dataset(train_pairs, tokenizer, tokens_per_batch, max_length, seed=seed)
    valid, _ = make_dataset(valid_pairs, tokenizer, tokens_per_batch, max_length, shuffle=False)
    return train, valid, tokenizer


@command("train", "Train a Transformer with model.fit; rerun to resume an interrupted run.", _train_arguments)
def run_train(args):
    import dataclasses

    from keras_transformer import Transformer
    from keras_transformer.training import TrainingOptions, model_config, select_strategy, train
    from keras_transformer.training.manifest import check_output_dir

    synthetic = args.corpus in SYNTHETIC_CORPORA
    vocab_size = _vocab_size(args)
    overrides = _parse_overrides(args.overrides)
    data = {"corpus": args.corpus, "vocab_size": vocab_size}  # part of the run's identity
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
        verbose=args.verbose if args.verbose == "auto" else int(args.verbose),
        **({"batch_size": args.batch_size} if synthetic else {"tokens_per_batch": args.tokens_per_batch}),
    )
    Transformer(**dataclasses.asdict(model_config(args.preset, vocab_size, **overrides)))  # unbuilt: checks only
    same_data = check_output_dir(args.output_dir, {"data": data, "seed": args.seed}, args.overwrite, partial=True)
    train_data, valid_data, tokenizer = corpus_datasets(args, vocab_size, reuse_tokenizer=same_data == "resume")
    if tokenizer is not None and same_data == "resume" and not os.path.exists(tokenizer_path(args.output_dir)):
        tokenizer.save(args.output_dir)  # a resumed run whose tokenizer was removed: learned again alike
    model = train(
        args.preset,
        train_data,
        args.output_dir,
        validation_data=valid_data,
        vocab_size=tokenizer.vocab_size if tokenizer else vocab_size,
        data=data,
        model_overrides=overrides,
        options=options,
        write_run_files=tokenizer.save if tokenizer else None,  # before run.json: see claim_output_dir
    )
    save_inference_model(model, os.path.join(args.output_dir, "model.keras"))
    return 0


def save_inference_model(model, path):
    """Saves the trained weights in a fresh float32 model, without the
    training optimizer, as a `.keras` file that `export` and `translate` load."""
    import dataclasses

    from keras_transformer import Transformer

    inference = Transformer(**dataclasses.asdict(model.transformer_config))
    inference.build(((None, None), (None, None)))
    inference.set_weights(model.get_weights())
    inference.save(path)
    print(f"Saved {path}")


# ---------------------------------------------------------------- average-checkpoints


def _average_arguments(p):
    p.add_argument("checkpoints", nargs="+",
                   help="a checkpoint directory, or .weights.h5 files to average")
    p.add_argument("--last", type=int, default=5,
                   help="with a directory: average its newest N intact checkpoints (paper: 5 base, 20 big)")
    p.add_argument("--output", required=True, help="the averaged .weights.h5 file")


@command("average-checkpoints", "Average the weights of the last N checkpoints into one file.", _average_arguments)
def run_average_checkpoints(args):
    import os

    from keras_transformer.training.averaging import average_checkpoints

    source = args.checkpoints[0] if len(args.checkpoints) == 1 and os.path.isdir(args.checkpoints[0]) else args.checkpoints
    paths = average_checkpoints(source, args.output, last=args.last)
    print(f"Averaged {len(paths)} checkpoint(s) into {args.output}:")
    for path in paths:
        print(f"  {path}")
    return 0


from keras_transformer import cli_serving  # noqa: E402,F401 - registers export, translate, serve

if __name__ == "__main__":
    from keras_transformer.cli import main as package_main  # the module that holds the commands

    sys.exit(package_main())
