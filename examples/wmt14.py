"""The paper's experiment end to end: data, vocabulary, training, averaging,
beam search, BLEU, export, reload.

Offline on the corpus shipped with the package (the default, a few minutes on
2 CPU cores):

    python examples/wmt14.py --output-dir runs/tatoeba

WMT14 English-German with the paper's base recipe (needs TensorFlow Datasets'
wmt14_translate, downloaded or placed in --manual-dir):

    python examples/wmt14.py --data tfds --pair de-en --source en --preset base \
        --vocab-size 37000 --tokens-per-batch 25000 --train-steps 100000 --average 5

Local parallel files: `--data files --train-files train.tsv --test-files test.tsv`.

The whole Tatoeba file (validation and test are the shipped splits); the
pretrained model of saved_models/tatoeba_en_fr, whose README has the full
command, was trained this way:

    python examples/wmt14.py --data tatoeba-full --corpus-file tatoeba_en_fr.tsv.gz \
        --preset small --vocab-size 5000 --tokens-per-batch 16384 --train-steps 6000 ...

Without TensorFlow (a JAX or PyTorch GPU machine), batches come from NumPy
(`--input numpy`, the default there) and the run stops after training and
averaging with `model.keras`; evaluate and export it where TensorFlow is
(`keras-transformer evaluate` / `keras-transformer export`).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="shipped", choices=["shipped", "tatoeba-full", "tfds", "files"],
                   help="shipped: keras_transformer.datasets' tatoeba_en_fr; tatoeba-full: all of --corpus-file "
                        "but the shipped validation and test sources; tfds: wmt14_translate; files: TSV")
    p.add_argument("--corpus-file", help="the full tatoeba_en_fr.tsv.gz (--data tatoeba-full)")
    p.add_argument("--pair", default="de-en", choices=["de-en", "fr-en"], help="WMT14 pair (--data tfds)")
    p.add_argument("--source", default="en", help="source language of the pair (--data tfds)")
    p.add_argument("--data-dir", help="TFDS data_dir"), p.add_argument("--manual-dir", help="TFDS manual_dir")
    p.add_argument("--train-files", nargs="+", help="TSV files (--data files)")
    p.add_argument("--test-files", nargs="+", help="TSV files (--data files)")
    p.add_argument("--preset", default="tiny", choices=["tiny", "small", "base", "big"])
    p.add_argument("--dropout-rate", type=float, default=None, help="default: the preset's")
    p.add_argument("--vocab-size", type=int, default=8000, help="shared BPE vocabulary (paper: 37000 En-De)")
    p.add_argument("--train-steps", type=int, default=1200)
    p.add_argument("--tokens-per-batch", type=int, default=3072, help="global, all replicas together")
    p.add_argument("--tokens-per-step", type=int, default=None,
                   help="target tokens per optimizer step (paper: 25000); default: one batch")
    p.add_argument("--warmup-steps", type=int, default=None, help="default: 4000, or a third of a short run")
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--average", type=int, default=3, help="average the last N checkpoints (paper: 5 base, 20 big)")
    p.add_argument("--max-train-seconds", type=float, default=None,
                   help="also stop at the first checkpoint after this much training time")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--bucket-growth", type=float, default=1.25,
                   help="padded lengths grow by this factor (larger: fewer compiled shapes, more padding)")
    p.add_argument("--input", default="auto", choices=["auto", "tf.data", "numpy"],
                   help="auto: tf.data where TensorFlow is installed, else NumPy batches")
    p.add_argument("--stop-after", default="export", choices=["average", "evaluate", "export"],
                   help="last stage to run (export also reloads the SavedModel and translates)")
    p.add_argument("--beam-size", type=int, default=4), p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--test-limit", type=int, default=None, help="evaluate on the first N test sources only")
    p.add_argument("--output-dir", default="runs/tatoeba_en_fr")
    p.add_argument("--export-dir", default=None, help="default: saved_models/<name> under --output-dir")
    p.add_argument("--export-buckets", type=int, nargs="+", default=None,
                   help="source lengths of the SavedModel's graph branches (default: 16 32 64 128 and the longest)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def load_pairs(args):
    """(train, validation, test, name) pairs for the chosen data source."""
    from keras_transformer import datasets
    from keras_transformer.data import load_wmt14, read_tsv

    if args.data == "shipped":
        return (*(datasets.load("tatoeba_en_fr", s) for s in ("train", "validation", "test")), "tatoeba_en_fr")
    if args.data == "tatoeba-full":
        if not args.corpus_file:
            raise SystemExit("--data tatoeba-full needs --corpus-file (the full tatoeba_en_fr.tsv.gz)")
        if not os.path.isfile(args.corpus_file):
            raise SystemExit(f"--corpus-file: no file at {args.corpus_file!r}")
        train = list(datasets.full_train_pairs(args.corpus_file))
        return (train, *(datasets.load("tatoeba_en_fr", s) for s in ("validation", "test")), "tatoeba_en_fr")
    if args.data == "files":
        if not args.train_files or not args.test_files:
            raise SystemExit("--data files needs --train-files and --test-files")
        try:
            train = [p for f in args.train_files for p in read_tsv(f)]
            test = [p for f in args.test_files for p in read_tsv(f)]
        except OSError as error:
            raise SystemExit(f"wmt14.py: error: {error}") from error
        if len(test) < 2:  # halved into validation and test
            raise SystemExit(f"--test-files must hold at least 2 pairs. Received: {len(test)} pair(s)")
        return train, test[: len(test) // 2], test[len(test) // 2 :], "files"
    target = [l for l in args.pair.split("-") if l != args.source][0]
    options = dict(pair=args.pair, source=args.source, data_dir=args.data_dir, manual_dir=args.manual_dir)
    try:
        splits = [list(load_wmt14(split=s, **options)) for s in ("train", "validation", "test")]
    except RuntimeError as error:
        raise SystemExit(str(error))
    return (*splits, f"wmt14_{args.source}_{target}")


def data_identity(args, name):
    """What makes a run's data the same data, recorded in its run.json.

    Local files count by their contents (SHA-256), not their names.
    """
    data = {"source": args.data, "corpus": name, "vocab_size": args.vocab_size}
    files = None
    if args.data == "tatoeba-full":
        files = {"corpus": [args.corpus_file]}
    elif args.data == "files":
        files = {"train": args.train_files, "test": args.test_files}
    if files:
        from keras_transformer.training.checkpoints import file_sha256

        data["sha256"] = {split: [file_sha256(path) for path in paths] for split, paths in files.items()}
    return data


def _has_tensorflow():
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return False
    return True


def batches(args, pairs, tokenizer, shuffle, numpy_input):
    """Training or validation batches: a tf.data.Dataset, or a NumPy pass function."""
    from keras_transformer.data import bucket_boundaries, make_dataset, numpy_batches

    boundaries = bucket_boundaries(args.max_length, growth=args.bucket_growth)
    if numpy_input:
        options = dict(tokens_per_batch=args.tokens_per_batch, max_length=args.max_length,
                       boundaries=boundaries, fixed_shapes=True, shuffle=shuffle)
        return lambda index: numpy_batches(pairs, tokenizer, seed=args.seed + index, **options)
    dataset, _ = make_dataset(pairs, tokenizer, args.tokens_per_batch, args.max_length, shuffle=shuffle,
                              seed=args.seed, boundaries=boundaries)
    return dataset


def main(argv=None):
    args = parse_args(argv)
    import keras

    from keras_transformer import Transformer, datasets
    from keras_transformer.data import SubwordTokenizer
    from keras_transformer.training import (
        RunMismatchError, TimeLimit, TrainingOptions, average_checkpoints, latest_checkpoint, train,
    )
    from keras_transformer.training.manifest import check_output_dir

    started = time.time()
    try:  # checked before any data is read or a vocabulary learned
        options = TrainingOptions(
            train_steps=args.train_steps, checkpoint_every=args.checkpoint_every, keep_checkpoints=max(args.average, 1),
            warmup_steps=args.warmup_steps or min(4000, max(1, args.train_steps // 3)),
            tokens_per_batch=args.tokens_per_batch, tokens_per_step=args.tokens_per_step or args.tokens_per_batch,
            seed=args.seed, validate_every=2,
        )
    except ValueError as error:
        raise SystemExit(f"wmt14.py: error: {error}") from error
    tensorflow = _has_tensorflow()
    numpy_input = args.input == "numpy" or (args.input == "auto" and not tensorflow)
    if not tensorflow and (args.input == "tf.data" or args.data == "tfds"):
        raise SystemExit("--input tf.data and --data tfds need TensorFlow: pip install -e '.[tensorflow]'")
    stop_after = args.stop_after if tensorflow else "average"
    if stop_after != args.stop_after:
        print("[note] TensorFlow is not installed: stopping after training and averaging (model.keras); "
              "evaluate and export where it is (keras-transformer evaluate / export).")
    train_pairs, valid_pairs, test_pairs, name = load_pairs(args)
    print(f"[data] {name}: {len(train_pairs)} training, {len(valid_pairs)} validation, {len(test_pairs)} test pairs")

    data = data_identity(args, name)
    try:  # another run's directory is refused before a vocabulary is learned or a file written
        status = check_output_dir(args.output_dir, {"data": data, "seed": args.seed}, partial=True)
    except (RunMismatchError, OSError) as error:
        raise SystemExit(f"wmt14.py: error: {error}") from error
    tokenizer_path = os.path.join(args.output_dir, "tokenizer.model")
    if status == "resume" and os.path.exists(tokenizer_path):
        tokenizer = SubwordTokenizer.load(tokenizer_path)
    else:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], args.vocab_size, seed=args.seed)
        if status == "resume":  # its tokenizer was removed: learned again alike
            tokenizer.save(args.output_dir)
    print(f"[vocabulary] {tokenizer.vocab_size} shared BPE pieces -> {tokenizer_path}")

    train_data = batches(args, train_pairs, tokenizer, True, numpy_input)
    valid_data = batches(args, valid_pairs, tokenizer, False, numpy_input)
    overrides = {"max_length": max(args.max_length, 256)}
    if args.dropout_rate is not None:
        overrides["dropout_rate"] = args.dropout_rate
    time_limit = [TimeLimit(args.max_train_seconds)] if args.max_train_seconds else []
    model = train(
        args.preset, train_data, args.output_dir, validation_data=valid_data,
        vocab_size=tokenizer.vocab_size, data=data, model_overrides=overrides, options=options,
        callbacks=time_limit, write_run_files=tokenizer.save,  # a new run's tokenizer, before its run.json
    )
    checkpoints = os.path.join(args.output_dir, "checkpoints")
    steps = latest_checkpoint(checkpoints).step
    training_seconds = time.time() - started
    print(f"[training] {steps} steps done at {training_seconds:.0f} s")

    # An inference model (float32, no optimizer) with the averaged weights.
    averaged = os.path.join(args.output_dir, "average.weights.h5")
    used = average_checkpoints(checkpoints, averaged, last=args.average)
    inference = Transformer(**{**model.get_config(), "dtype": "float32"})
    inference.build(((None, None), (None, None)))
    inference.load_weights(averaged)
    inference.save(os.path.join(args.output_dir, "model.keras"))
    print(f"[average] mean of {len(used)} checkpoint(s) -> {averaged}")
    summary = dict(
        data=name, preset=args.preset, params=inference.count_params(), config=inference.get_config(),
        steps=steps, tokens_per_batch=args.tokens_per_batch, seconds_to_average=round(time.time() - started),
        backend=keras.backend.backend(), device=_device(), averaged=[os.path.basename(p) for p in used],
        history={k: [round(float(v), 4) for v in values] for k, values in model.history.history.items()},
        command=" ".join([os.path.basename(sys.executable)] + sys.argv),
    )
    with open(os.path.join(args.output_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    if stop_after == "average":
        print(f"[done] in {time.time() - started:.0f} s: {os.path.join(args.output_dir, 'model.keras')}")
        return None
    return evaluate_and_export(args, inference, tokenizer, test_pairs, name, started)


def _device():
    """The accelerator's name, or the processor's."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.devices()[0].device_kind
    import platform

    return platform.processor() or platform.machine()


def evaluate_and_export(args, inference, tokenizer, test_pairs, name, started):
    import keras
    import tensorflow as tf

    from keras_transformer import datasets
    from keras_transformer.evaluation import corpus_bleu
    from keras_transformer.decoding import Translator
    from keras_transformer.export import DEFAULT_BUCKETS, export

    sources, references = datasets.references(test_pairs)
    if args.test_limit:
        sources, references = sources[: args.test_limit], references[: args.test_limit]
    translator = Translator(inference, tokenizer, beam_size=args.beam_size, alpha=args.alpha)
    hypotheses = []
    progress = keras.utils.Progbar(len(sources), unit_name="sentence")
    for start in range(0, len(sources), 256):
        hypotheses += translator.translate(sources[start : start + 256])
        progress.update(len(hypotheses))
    bleu_score, bleu_signature, chrf_score, chrf_signature = corpus_bleu(hypotheses, references)
    print(f"[test] {len(sources)} sources, beam {args.beam_size}, alpha {args.alpha}")
    print(f"[test] {bleu_score}  ({bleu_signature})")
    print(f"[test] {chrf_score}  ({chrf_signature})")
    if args.stop_after == "evaluate":
        print(f"[done] in {time.time() - started:.0f} s: BLEU {bleu_score.score:.1f}, chrF {chrf_score.score:.1f}")
        return bleu_score.score

    export_dir = args.export_dir or os.path.join(args.output_dir, "saved_models", name)
    path = export(inference, tokenizer, export_dir, beam_size=args.beam_size, alpha=args.alpha,
                  buckets=tuple(args.export_buckets or DEFAULT_BUCKETS), metadata={"bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2)})
    print(f"[export] SavedModel -> {path}")

    reloaded = tf.saved_model.load(path).signatures["serving_default"]
    examples = sources[:5]
    outputs = reloaded(inputs=tf.constant(examples))
    print("[reloaded SavedModel]")
    for source, translation in zip(examples, outputs["translations"].numpy()):
        print(f"  {source}  ->  {translation.decode('utf-8')}")
    print(f"[done] in {time.time() - started:.0f} s: BLEU {bleu_score.score:.1f}, chrF {chrf_score.score:.1f}, SavedModel {path}")
    return bleu_score.score


if __name__ == "__main__":
    main()
