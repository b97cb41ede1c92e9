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
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="shipped", choices=["shipped", "tfds", "files"],
                   help="shipped: keras_transformer.datasets' tatoeba_en_fr; tfds: wmt14_translate; files: TSV")
    p.add_argument("--pair", default="de-en", choices=["de-en", "fr-en"], help="WMT14 pair (--data tfds)")
    p.add_argument("--source", default="en", help="source language of the pair (--data tfds)")
    p.add_argument("--data-dir", help="TFDS data_dir"), p.add_argument("--manual-dir", help="TFDS manual_dir")
    p.add_argument("--train-files", nargs="+", help="TSV files (--data files)")
    p.add_argument("--test-files", nargs="+", help="TSV files (--data files)")
    p.add_argument("--preset", default="tiny", choices=["tiny", "small", "base", "big"])
    p.add_argument("--vocab-size", type=int, default=8000, help="shared BPE vocabulary (paper: 37000 En-De)")
    p.add_argument("--train-steps", type=int, default=1200)
    p.add_argument("--tokens-per-batch", type=int, default=3072, help="global, all replicas together")
    p.add_argument("--tokens-per-step", type=int, default=None,
                   help="target tokens per optimizer step (paper: 25000); default: one batch")
    p.add_argument("--warmup-steps", type=int, default=None, help="default: 4000, or a third of a short run")
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--average", type=int, default=3, help="average the last N checkpoints (paper: 5 base, 20 big)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--beam-size", type=int, default=4), p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--test-limit", type=int, default=None, help="evaluate on the first N test sources only")
    p.add_argument("--output-dir", default="runs/tatoeba_en_fr")
    p.add_argument("--export-dir", default=None, help="default: saved_models/<name> under --output-dir")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def load_pairs(args):
    """(train, validation, test, name) pairs for the chosen data source."""
    from keras_transformer import datasets
    from keras_transformer.data import load_wmt14, read_tsv

    if args.data == "shipped":
        return (*(datasets.load("tatoeba_en_fr", s) for s in ("train", "validation", "test")), "tatoeba_en_fr")
    if args.data == "files":
        if not args.train_files or not args.test_files:
            raise SystemExit("--data files needs --train-files and --test-files")
        train = [p for f in args.train_files for p in read_tsv(f)]
        test = [p for f in args.test_files for p in read_tsv(f)]
        return train, test[: len(test) // 2], test[len(test) // 2 :], "files"
    target = [l for l in args.pair.split("-") if l != args.source][0]
    options = dict(pair=args.pair, source=args.source, data_dir=args.data_dir, manual_dir=args.manual_dir)
    try:
        splits = [list(load_wmt14(split=s, **options)) for s in ("train", "validation", "test")]
    except RuntimeError as error:
        raise SystemExit(str(error))
    return (*splits, f"wmt14_{args.source}_{target}")


def main(argv=None):
    args = parse_args(argv)
    import keras
    import tensorflow as tf

    from keras_transformer import Transformer, datasets
    from keras_transformer.cli_serving import corpus_bleu
    from keras_transformer.data import SubwordTokenizer, make_dataset
    from keras_transformer.decoding import Translator
    from keras_transformer.export import export
    from keras_transformer.training import average_checkpoints, train

    started = time.time()
    train_pairs, valid_pairs, test_pairs, name = load_pairs(args)
    print(f"[data] {name}: {len(train_pairs)} training, {len(valid_pairs)} validation, {len(test_pairs)} test pairs")

    os.makedirs(args.output_dir, exist_ok=True)
    tokenizer_path = os.path.join(args.output_dir, "tokenizer.model")
    if os.path.exists(tokenizer_path):  # resuming
        tokenizer = SubwordTokenizer.load(tokenizer_path)
    else:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], args.vocab_size, seed=args.seed)
        tokenizer.save(args.output_dir)
    print(f"[vocabulary] {tokenizer.vocab_size} shared BPE pieces -> {tokenizer_path}")

    train_data, _ = make_dataset(train_pairs, tokenizer, args.tokens_per_batch, args.max_length, seed=args.seed)
    valid_data, _ = make_dataset(valid_pairs, tokenizer, args.tokens_per_batch, args.max_length, shuffle=False)
    warmup = args.warmup_steps or min(4000, max(1, args.train_steps // 3))
    model = train(
        args.preset, train_data, args.output_dir, validation_data=valid_data,
        vocab_size=tokenizer.vocab_size, model_overrides={"max_length": max(args.max_length, 256)},
        train_steps=args.train_steps, checkpoint_every=args.checkpoint_every, keep_checkpoints=max(args.average, 1),
        warmup_steps=warmup, tokens_per_batch=args.tokens_per_batch,
        tokens_per_step=args.tokens_per_step or args.tokens_per_batch, seed=args.seed, validate_every=2,
    )
    print(f"[training] {args.train_steps} steps done at {time.time() - started:.0f} s")

    # An inference model (float32, no optimizer) with the averaged weights.
    averaged = os.path.join(args.output_dir, "average.weights.h5")
    used = average_checkpoints(os.path.join(args.output_dir, "checkpoints"), averaged, last=args.average)
    inference = Transformer(**model.get_config())
    inference.build(((None, None), (None, None)))
    inference.load_weights(averaged)
    inference.save(os.path.join(args.output_dir, "model.keras"))
    print(f"[average] mean of {len(used)} checkpoint(s) -> {averaged}")

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

    export_dir = args.export_dir or os.path.join(args.output_dir, "saved_models", name)
    path = export(inference, tokenizer, export_dir, beam_size=args.beam_size, alpha=args.alpha,
                  metadata={"bleu": round(bleu_score.score, 2), "chrf": round(chrf_score.score, 2)})
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
