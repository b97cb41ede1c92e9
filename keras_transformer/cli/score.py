"""`keras-transformer score`: score given translations with a model.

    keras-transformer score tatoeba_en_fr --pairs pairs.tsv
    keras-transformer score tatoeba_en_fr --pairs test.en test.fr --output scores.jsonl

Each pair of a TSV file (source<TAB>translation), or of a source and a
target file aligned line by line, gets one JSON line: `scores` (the
translation's log-probability over the length penalty, as the search scores
its outputs), `totals` (the log-probability), `tokens` (its pieces, EOS
last) and `token_log_probs`, as `Translator.score` returns them. For
filtering parallel data, or ranking translations from elsewhere. MODEL is a
preset (a shipped name or a preset directory), a `.keras` file with
`--tokenizer`, or a SavedModel folder (`Translator.from_saved_model`).
"""

import json
import sys

from keras_transformer.cli.common import add_model_argument, load_translator, positive_int

NAME = "score"
HELP = "Score given translations: each pair's log-probability and its tokens' (JSON lines)."


def add_arguments(p):
    from keras_transformer.decoding.defaults import ALPHA, BATCH_SIZE

    add_model_argument(p)
    p.add_argument("--pairs", nargs="+", required=True, metavar="FILE",
                   help="a TSV file (source<TAB>translation), or a source and a target file aligned line by line "
                        "(plain or .gz)")
    p.add_argument("--skip-bad-lines", action="store_true",
                   help="skip and count bad lines (no tab, an empty side, not UTF-8) instead of stopping")
    p.add_argument("--output", help="write the JSON lines here (default: standard output)")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE, help="pairs per batch")
    p.add_argument("--alpha", type=float, default=None, help=f"the length penalty's exponent (default: {ALPHA})")


def run(args):
    from keras_transformer.data.training_data import read_files

    if len(args.pairs) > 2:
        raise SystemExit(f"--pairs takes one TSV file or a source and a target file. Received: {args.pairs}")
    pairs = read_files(args.pairs, args.skip_bad_lines, log=lambda line: print(line, file=sys.stderr))
    score = score_function(args.model, args.tokenizer, args.batch_size, args.alpha)
    out = sys.stdout if args.output is None else open(args.output, "w", encoding="utf-8")
    try:
        step = 16 * args.batch_size
        for start in range(0, len(pairs), step):
            sources, targets = zip(*pairs[start : start + step])
            for row in score(list(sources), list(targets)):
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def score_function(model, tokenizer, batch_size, alpha):
    """`score(sources, targets) -> rows` of outputs, by the model's `Translator`."""
    options = {} if alpha is None else {"alpha": alpha}
    translator = load_translator(model, tokenizer, batch_size, **options)
    return lambda sources, targets: [s.prediction() for s in translator.score(sources, targets)]
