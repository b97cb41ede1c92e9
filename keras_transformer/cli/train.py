"""`keras-transformer train`: train a Transformer with `model.fit`; rerun to resume.

    keras-transformer train --corpus tatoeba_en_fr --architecture small --output-dir runs/small \
        --tokens-per-batch 4096 --train-steps 20000
    keras-transformer train --corpus tatoeba_en_fr --corpus-file tatoeba_en_fr.tsv.gz \
        --architecture small --output-dir runs/full      # the whole corpus, held-out sources left out
    keras-transformer train --corpus synthetic-copy --architecture tiny --output-dir /tmp/run \
        --train-steps 4 --checkpoint-every 2 --fit-verbose 0

The run directory gets run.json, checkpoints/, logs/, tokenizer.model and,
at the end, model.keras (what `export` and `translate` load); `keras-transformer
preset RUN_DIR` turns it into a preset. Without TensorFlow (a JAX or PyTorch
machine) the corpus is batched with NumPy (`read_corpus`) and TensorBoard
logs are not written.
"""

import os

NAME = "train"
HELP = "Train a Transformer with model.fit; rerun to resume an interrupted run."

SYNTHETIC_CORPORA = ("synthetic-copy", "synthetic-reverse")


def add_arguments(p):
    p.add_argument("--corpus", required=True,
                   help=f"corpus name for keras_transformer.datasets.load, or one of {SYNTHETIC_CORPORA}")
    p.add_argument("--output-dir", required=True, help="run directory: run.json, checkpoints/, logs/")
    p.add_argument("--architecture", default="base", choices=["tiny", "small", "base", "big"],
                   help="the untrained model's size (keras_transformer.ARCHITECTURES)")
    p.add_argument("--corpus-file", default=None,
                   help="the corpus's full .tsv(.gz) file to train on instead of its shipped training split "
                        "(e.g. tatoeba_en_fr.tsv.gz); the shipped validation and test sources are left out")
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
    p.add_argument("--fit-verbose", default="auto", choices=["auto", "0", "1", "2"],
                   help="Keras fit verbosity: 0 silent, 1 progress bar, 2 one line per epoch")


def run(args):
    import dataclasses

    from keras_transformer import Transformer
    from keras_transformer.training import TrainingOptions, model_config, select_strategy, train
    from keras_transformer.training.inference_model import save_inference_model
    from keras_transformer.training.manifest import check_output_dir

    check_corpus(args.corpus)
    synthetic = args.corpus in SYNTHETIC_CORPORA
    vocab_size = _vocab_size(args)
    overrides = parse_overrides(args.overrides)
    data = {"corpus": args.corpus, "vocab_size": vocab_size}  # part of the run's identity
    if args.corpus_file is not None:
        check_corpus_file(args)
        data["corpus_file"] = os.path.basename(args.corpus_file)
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
    Transformer(**dataclasses.asdict(model_config(args.architecture, vocab_size, **overrides)))  # unbuilt: checks only
    same_data = check_output_dir(args.output_dir, {"data": data, "seed": args.seed}, args.overwrite, partial=True)
    train_data, valid_data, tokenizer = corpus_datasets(args, vocab_size, reuse_tokenizer=same_data == "resume")
    if tokenizer is not None and same_data == "resume" and not os.path.exists(tokenizer_path(args.output_dir)):
        tokenizer.save(args.output_dir)  # a resumed run whose tokenizer was removed: learned again alike
    model = train(
        args.architecture,
        train_data,
        args.output_dir,
        validation_data=valid_data,
        vocab_size=tokenizer.vocab_size if tokenizer else vocab_size,
        data=data,
        model_overrides=overrides,
        options=options,
        write_run_files=tokenizer.save if tokenizer else None,  # before run.json: see claim_output_dir
    )
    print(f"Saved {save_inference_model(model, os.path.join(args.output_dir, 'model.keras'))}")
    return 0


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
    (`keras_transformer.data.shipped.read_corpus`), batched by
    `--tokens-per-batch` tokens globally. With `reuse_tokenizer`, the run's
    `tokenizer.model`, if any, is loaded.
    """
    if args.corpus in SYNTHETIC_CORPORA:
        from keras_transformer.training.synthetic import copy_task

        reverse = args.corpus == "synthetic-reverse"
        train = copy_task(256, vocab_size=vocab_size, seed=args.seed, reverse=reverse)
        valid = copy_task(64, vocab_size=vocab_size, seed=args.seed + 1, reverse=reverse)
        return train, valid, None
    from keras_transformer.data.shipped import read_corpus

    path = tokenizer_path(args.output_dir)
    return read_corpus(
        args.corpus, args.tokens_per_batch, args.seed, vocab_size=vocab_size,
        tokenizer_path=path if reuse_tokenizer and os.path.exists(path) else None,
        corpus_file=args.corpus_file,
    )
