"""The experiment of "Attention Is All You Need" (Vaswani et al., 2017), top
to bottom: shared BPE subwords, the Transformer, Adam on the warm-up schedule
with label smoothing, checkpoint averaging, beam search, sacreBLEU, and a
SavedModel (TensorFlow backend) that is reloaded and used.

The English->French corpus shipped with the package, offline, at CPU scale:

    python examples/wmt14.py --output-dir runs/tatoeba_en_fr

WMT14 English->German, the paper's base model, from TensorFlow Datasets'
wmt14_translate (offline: place the archives its error lists in
<data-dir>/downloads/manual). `--architecture big` trains 300k steps, averages 20:

    python examples/wmt14.py --data tfds --pair de-en --source en --architecture base --output-dir runs/wmt14

Rerun a command to resume from its newest checkpoint. Other corpora, local
files, checks that a resumed directory holds the same run, gradient accumulation,
several GPUs: `keras-transformer train`.
"""

import argparse
import os

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--output-dir", default="runs/tatoeba_en_fr")
parser.add_argument("--data", default="shipped", choices=["shipped", "tfds"],
                    help="shipped: the package's tatoeba_en_fr; tfds: TensorFlow Datasets' wmt14_translate")
parser.add_argument("--pair", default="de-en", choices=["de-en", "fr-en"], help="WMT14 pair (--data tfds)")
parser.add_argument("--source", default="en", help="source language of --pair")
parser.add_argument("--data-dir", help="TensorFlow Datasets' data_dir (default ~/tensorflow_datasets)")
parser.add_argument("--architecture", choices=["tiny", "small", "base", "big"], help="default: tiny (shipped), base (tfds)")
parser.add_argument("--train-steps", type=int, help="default: 1200 (shipped), 100k (base), 300k (big)")
parser.add_argument("--vocab-size", type=int, help="BPE pieces; default: 8000 (shipped), 37000 (tfds)")
parser.add_argument("--tokens-per-batch", type=int, help="default: 3072 (shipped), 25000 (tfds)")
parser.add_argument("--test-limit", type=int, help="translate and score only the first N test sources")


def recipe(args):
    """The paper's recipe on WMT14 (sections 5.1-5.3, 6.1); one sized for a CPU on the shipped corpus."""
    paper = args.data == "tfds"
    architecture = args.architecture or ("base" if paper else "tiny")
    steps = args.train_steps or (300_000 if architecture == "big" else 100_000 if paper else 1200)
    interval = 1000 if paper else 200  # steps between checkpoints; a run of other length: one, at its end
    return argparse.Namespace(
        architecture=architecture, train_steps=steps, vocab_size=args.vocab_size or (37000 if paper else 8000),
        tokens_per_batch=args.tokens_per_batch or (25000 if paper else 3072),
        warmup_steps=min(4000, max(1, steps // 3)), checkpoint_every=interval if steps % interval == 0 else steps,
        average=(20 if architecture == "big" else 5) if paper else 3)


def main(argv=None):
    args = parser.parse_args(argv)
    numbers = (args.train_steps, args.vocab_size, args.tokens_per_batch, args.test_limit)
    if any(n is not None and n < 1 for n in numbers):
        parser.error("--train-steps, --vocab-size, --tokens-per-batch and --test-limit must be positive")
    languages = args.pair.split("-")
    if args.data == "tfds" and args.source not in languages:
        parser.error(f"--source must be one of {languages} for --pair {args.pair}")
    r = recipe(args)
    import keras
    import tensorflow as tf

    from keras_transformer import LabelSmoothedCrossEntropy, MaskedAccuracy, Transformer, datasets, paper_optimizer
    from keras_transformer.data import SubwordTokenizer, load_wmt14, make_dataset
    from keras_transformer import Translator
    from keras_transformer.evaluation import corpus_bleu
    from keras_transformer.export import export
    from keras_transformer.training import CheckpointAndRestore, average_checkpoints, resolve_precision

    # 5.1 Sentence pairs, and one BPE vocabulary shared by both languages.
    splits = ("train", "validation", "test")
    if args.data == "tfds":
        name = f"wmt14_{args.source}_{languages[1 - languages.index(args.source)]}"
        try:
            train_pairs, valid_pairs, test_pairs = (
                list(load_wmt14(args.pair, args.source, split, data_dir=args.data_dir)) for split in splits)
        except RuntimeError as error:  # offline: it lists the archives to place by hand
            raise SystemExit(str(error)) from error
    else:
        name = "tatoeba_en_fr"
        train_pairs, valid_pairs, test_pairs = (datasets.load(name, split) for split in splits)
    print(f"[data] {name}: {len(train_pairs)} training, {len(valid_pairs)} validation, {len(test_pairs)} test pairs")
    tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], r.vocab_size, seed=0)
    print(f"[vocabulary] {tokenizer.vocab_size} shared BPE pieces -> {tokenizer.save(args.output_dir)}")

    # 5.1 Batches of sentences of similar length, about `tokens_per_batch`
    # source and as many target tokens each (25,000 in the paper).
    train_batches, _ = make_dataset(train_pairs, tokenizer, r.tokens_per_batch, shuffle=True, seed=0)
    valid_batches, _ = make_dataset(valid_pairs, tokenizer, r.tokens_per_batch, shuffle=False)
    valid_batches = valid_batches.apply(tf.data.experimental.assert_cardinality(sum(1 for _ in valid_batches)))

    # 3 and Table 3: the model, float32 on a CPU, mixed precision on a GPU.
    keras.utils.set_random_seed(0)
    model = Transformer.from_architecture(r.architecture, vocab_size=tokenizer.vocab_size, max_length=256,
                                          dtype=resolve_precision("auto"))
    # 5.3 Adam(0.9, 0.98, 1e-9), the rate rising for `warmup_steps` (4000 in the paper, a third of
    # a shorter run), then falling as 1/sqrt(step). 5.4 Label smoothing 0.1 (dropout: the architecture's).
    model.compile(optimizer=paper_optimizer(model.transformer_config.d_model, r.warmup_steps),
                  loss=LabelSmoothedCrossEntropy(0.1), metrics=[MaskedAccuracy()])

    # 5.2 Training, one fit epoch per checkpoint; the callback resumes a restarted run from the newest.
    checkpoints = os.path.join(args.output_dir, "checkpoints")
    restore = CheckpointAndRestore(checkpoints, r.checkpoint_every, keep=r.average)
    model.fit(
        train_batches.repeat().skip(restore.consumed_batches), steps_per_epoch=r.checkpoint_every,
        epochs=r.train_steps // r.checkpoint_every, initial_epoch=restore.initial_epoch,
        validation_data=valid_batches, validation_freq=2, shuffle=False,
        callbacks=[restore, keras.callbacks.TerminateOnNaN(),
                   keras.callbacks.TensorBoard(os.path.join(args.output_dir, "logs"))],
    )

    # 6.1 One model: the mean of the last checkpoints' weights, in float32.
    averaged = os.path.join(args.output_dir, "average.weights.h5")
    used = average_checkpoints(checkpoints, averaged, last=r.average)
    model = Transformer(**{**model.get_config(), "dtype": "float32"})
    model.load_weights(averaged)
    model.save_to_preset(args.output_dir)  # beside tokenizer.model: the run directory is a preset
    print(f"[average] mean of {len(used)} checkpoint(s) -> {averaged}, the preset {args.output_dir}")

    # 6.1 Beam search (beam 4, length penalty alpha 0.6) on the test set,
    # scored with sacreBLEU against every reference of each source.
    sources, references = datasets.references(test_pairs)
    sources, references = sources[: args.test_limit], references[: args.test_limit]
    translator = Translator(model, tokenizer, beam_size=4, alpha=0.6)
    hypotheses, progress = [], keras.utils.Progbar(len(sources), unit_name="sentence")
    for start in range(0, len(sources), 256):
        hypotheses += translator.translate(sources[start : start + 256])
        progress.update(len(hypotheses))
    bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(hypotheses, references)
    print(f"[test] {len(sources)} sources, beam 4, alpha 0.6\n[test] {bleu}  ({bleu_signature})")
    print(f"[test] {chrf}  ({chrf_signature})")
    translations = os.path.join(args.output_dir, "test_translations.txt")
    with open(translations, "w", encoding="utf-8") as f:
        f.writelines(h + "\n" for h in hypotheses)  # one per source, in order
    print(f"[test] translations -> {translations}")

    # A SavedModel that tokenizes, searches and detokenizes in its graph, reloaded by TensorFlow alone.
    path = export(model, tokenizer, os.path.join(args.output_dir, "saved_models", name),
                  metadata={"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)})
    reloaded = tf.saved_model.load(path).signatures["serving_default"]
    print(f"[export] SavedModel -> {path}\n[reloaded SavedModel]")
    for source, translation in zip(sources[:5], reloaded(inputs=tf.constant(sources[:5]))["translations"].numpy()):
        print(f"  {source}  ->  {translation.decode('utf-8')}")
    print(f"[done] BLEU {bleu.score:.1f}, chrF {chrf.score:.1f}, SavedModel {path}")
    return bleu.score


if __name__ == "__main__":
    main()
