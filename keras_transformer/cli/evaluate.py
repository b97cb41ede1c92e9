"""`keras-transformer evaluate`: translate a test set, score it with sacreBLEU and chrF.

    keras-transformer evaluate saved_models/tatoeba_en_fr --corpus tatoeba_en_fr --split test
    keras-transformer evaluate tatoeba_en_fr --corpus tatoeba_en_fr --limit 100    # a preset, name or directory
    keras-transformer evaluate runs/mine --tsv my_test.tsv                  # a training run: a preset

MODEL is a preset (a shipped name or a preset directory; its own
tokenizer, decoded with `--beam-size` and `--alpha`), a SavedModel folder
(its own decoding settings), or a `.keras` file with `--tokenizer`.

Every reference of a source counts (`keras_transformer.evaluation.corpus_bleu`).
"""

from keras_transformer.cli.common import (
    add_decoding_arguments,
    add_model_argument,
    decoding_options,
    positive_int,
    progress_bar,
    translate_function,
    translate_sorted,
)

NAME = "evaluate"
HELP = "Translate a test set and score it with sacreBLEU and chrF (every reference of a source)."


def add_arguments(p):
    add_model_argument(p)
    p.add_argument("--corpus", default="tatoeba_en_fr", help="a shipped corpus (keras_transformer.datasets)")
    p.add_argument("--split", default="test", choices=["train", "validation", "test"], help="the split of --corpus")
    p.add_argument("--tsv", help="score a TSV file (source<TAB>reference lines) instead of --corpus")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip and count bad lines of --tsv instead of stopping at the first")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N sources")
    add_decoding_arguments(p)


def run(args):
    from keras_transformer import datasets
    from keras_transformer.evaluation import corpus_bleu
    from keras_transformer.training.training_data import read_files

    if args.tsv:
        pairs = read_files([args.tsv], args.skip_bad_lines)
    else:
        pairs = datasets.load(args.corpus, args.split)
    sources, references = datasets.references(pairs)
    sources, references = sources[: args.limit], references[: args.limit]
    translate, _, _ = translate_function(
        args.model, args.tokenizer, batch_size=args.batch_size, quantize=args.quantize, **decoding_options(args)
    )
    progress = progress_bar(len(sources))  # on standard error, beside the scores on standard output
    hypotheses = translate_sorted(translate, sources, args.batch_size, progress)
    bleu, bleu_signature, chrf, chrf_signature = corpus_bleu(hypotheses, references)
    print(f"{len(sources)} sources")
    print(f"{bleu}  ({bleu_signature})")
    print(f"{chrf}  ({chrf_signature})")
    return 0
