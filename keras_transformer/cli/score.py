"""`keras-transformer score`: score given translations with a model.

    keras-transformer score tatoeba_en_fr --pairs pairs.tsv
    keras-transformer score tatoeba_en_fr --pairs test.en test.fr --output scores.jsonl

Each pair of a TSV file (source<TAB>translation), or of a source and a
target file aligned line by line, gets one JSON line: `line` (its line in
the file or files, from 1), `scores` (the translation's log-probability
over the length penalty, as the search scores its outputs), `totals` (the
log-probability), `tokens` (its pieces, EOS last) and `token_log_probs`, as
`Translator.score` returns them. For filtering parallel data, or ranking
translations from elsewhere. A bad line (no tab, an empty side, not UTF-8)
or a pair longer than the model scores stops the command with its file and
line, or with `--skip-bad-lines` is skipped and counted. MODEL is a preset
(a shipped name or a preset directory), a `.keras` file with
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
                   help="skip and count bad lines (no tab, an empty side, not UTF-8, longer than the model scores) "
                        "instead of stopping")
    p.add_argument("--output", help="write the JSON lines here (default: standard output)")
    p.add_argument("--tokenizer", help="the SentencePiece .model file (with a .keras model)")
    p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE, help="pairs per batch")
    p.add_argument("--alpha", type=float, default=None, help=f"the length penalty's exponent (default: {ALPHA})")


def run(args):
    from keras_transformer.training.training_data import read_files

    if len(args.pairs) > 2:
        raise SystemExit(f"--pairs takes one TSV file or a source and a target file. Received: {args.pairs}")
    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    pairs = read_files(args.pairs, args.skip_bad_lines, log=log, numbered=True)
    options = {} if args.alpha is None else {"alpha": args.alpha}
    translator = load_translator(args.model, args.tokenizer, args.batch_size, **options)
    too_long = []  # (line, message) of the pairs skipped
    out = sys.stdout if args.output is None else open(args.output, "w", encoding="utf-8")
    try:
        step = 16 * args.batch_size
        for start in range(0, len(pairs), step):
            chunk = pairs[start : start + step]
            problems = length_problems(translator, chunk, args.pairs[0])
            if problems and not args.skip_bad_lines:
                raise ValueError(f"{problems[0][1]} Shorten the pair, or skip such pairs with --skip-bad-lines.")
            too_long += problems
            skipped = {line for line, _ in problems}
            kept = [(line, pair) for line, pair in chunk if line not in skipped]
            if not kept:
                continue
            sources, targets = (list(side) for side in zip(*(pair for _, pair in kept)))
            for (line, _), scored in zip(kept, translator.score(sources, targets)):
                out.write(json.dumps({"line": line, **scored.prediction()}, ensure_ascii=False) + "\n")
            out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
    if too_long:
        log(f"{' + '.join(args.pairs)}: skipped {len(too_long)} pair(s) longer than the model scores "
            f"(first: {too_long[0][1]})")
    return 0


def length_problems(translator, numbered_pairs, path):
    """`[(line, message)]` for the pairs of `numbered_pairs` that
    `translator` cannot score: a side over the model's length
    (`decoding.scoring.scoring_limits`), tokenized as `Translator.score`
    packs it, EOS included."""
    from keras_transformer.decoding.scoring import scoring_limits
    from keras_transformer.tokens import pack_source, pack_target, split_target

    limits = scoring_limits(translator.preprocessor.max_length)
    sides = list(zip(*(pair for _, pair in numbered_pairs)))
    lengths = (
        [len(pack_source(ids)) for ids in translator.tokenizer.encode(list(sides[0]))],
        [len(split_target(pack_target(ids))[1]) for ids in translator.tokenizer.encode(list(sides[1]))],
    )
    problems = []
    for index, (line, _) in enumerate(numbered_pairs):
        for name, side, most in zip(("source", "translation"), lengths, limits):
            if side[index] > most:
                problems.append((line, f"{path}:{line}: the {name} has {side[index]} tokens (EOS included); the "
                                       f"model scores at most {most}."))
                break
    return problems
