"""How often CTranslate2 gives our translations, on a model exported with
`keras-transformer export --format ctranslate2`.

For each preset: exports it (`export_ctranslate2`, what the command runs),
translates the sources of its shipped test split with our `Translator`
(greedy, and beam search with its defaults: beam 4, alpha 0.6) and with
CTranslate2 on the exported folder (greedy; beam search with the export's
recommended `length_penalty` and `patience`, then with CTranslate2's
default patience, 1, and with each of `--length-penalties`), and counts the
identical outputs. Each CTranslate2 output is cut at our length limit (its
source's length + 50 tokens), as the export's note says, since CTranslate2
takes one limit per batch.

A beam output that differs is put down to the penalties' form when each
engine's output is the better one under its own engine's penalty: ours
scores higher than CTranslate2's under GNMT's `((5 + length) / 6) **
alpha`, and CTranslate2's higher than ours under `length **
length_penalty`, both scored by our model on the same token ids
(`Translator.score_ids`). Any other difference is counted apart.

    python benchmarks/ctranslate2_agreement.py --output benchmarks/results/ctranslate2_agreement_cpu.json
"""

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_name, write_json  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--presets", nargs="+", default=["tatoeba_en_fr", "tatoeba_fr_en", "libreoffice_en_de"])
parser.add_argument("--length-penalties", type=float, nargs="*", default=[0.2, 0.3, 0.4, 0.5, 0.6, 1.0],
                    help="CTranslate2 length penalties to compare beside the recommended one")
parser.add_argument("--limit", type=int, default=None, help="only the first N sources of each test split")
parser.add_argument("--threads", type=int, default=2, help="CTranslate2's intra_threads")
parser.add_argument("--output", default=None, help="a JSON file for the results")


def test_sources(preset, limit):
    from keras_transformer import datasets
    from keras_transformer.models import presets

    corpus = presets.load_metadata(preset).get("data", {}).get("corpus", preset)
    sources, _ = datasets.references(datasets.load(corpus, "test"))
    return corpus, sources[:limit]


def identical(a, b):
    return sum(x == y for x, y in zip(a, b))


def compare(preset, args, folder):
    import ctranslate2
    import json

    from keras_transformer import SubwordTokenizer, Translator
    from keras_transformer.models import presets
    from keras_transformer.converters.ctranslate2 import SETTINGS_FILE, ctranslate2_source_tokens, export_ctranslate2
    from keras_transformer.tokens import EOS_ID, pack_source

    corpus, sources = test_sources(preset, args.limit)
    model, tokenizer = presets.load_model(preset), SubwordTokenizer.from_preset(preset)
    export_ctranslate2(model, tokenizer, folder)
    with open(os.path.join(folder, SETTINGS_FILE)) as f:
        settings = json.load(f)
    engine = ctranslate2.Translator(folder, intra_threads=args.threads)
    pieces = ctranslate2_source_tokens(tokenizer, sources)
    source_ids = [pack_source(ids) for ids in tokenizer.encode(sources)]

    def theirs(**options):
        """CTranslate2's output ids (a blank source: none) of every source, cut at our length limit."""
        results = engine.translate_batch(pieces, max_batch_size=64, max_decoding_length=settings["max_decoding_length"],
                                         **options)
        return [[tokenizer.processor.piece_to_id(p) for p in r.hypotheses[0]][: len(ids) + settings["max_extra_length"]]
                if p else [] for r, p, ids in zip(results, pieces, source_ids)]

    greedy = Translator(model, tokenizer, beam_size=1)
    search = Translator(model, tokenizer, beam_size=settings["beam_size"], alpha=settings["alpha"])
    start = time.perf_counter()
    ours_greedy, ours_beam = greedy.translate_ids(source_ids), search.translate_ids(source_ids)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs_greedy = theirs(beam_size=1)
    beam = dict(beam_size=settings["beam_size"], length_penalty=settings["length_penalty"])
    recommended = theirs(**beam, patience=settings["patience"])
    patience_1 = identical(ours_beam, theirs(**beam, patience=1))
    sweep = {lp: identical(ours_beam, theirs(**{**beam, "length_penalty": lp}, patience=settings["patience"]))
             for lp in args.length_penalties}
    theirs_s = time.perf_counter() - start

    differing = [i for i, (a, b) in enumerate(zip(ours_beam, recommended)) if a != b]
    penalty_form = 0
    if differing:
        rows = [source_ids[i] for i in differing]
        ours_scored = search.score_ids(rows, [ours_beam[i] + [EOS_ID] for i in differing])
        theirs_scored = search.score_ids(rows, [recommended[i] + [EOS_ID] for i in differing])
        for a, b in zip(ours_scored, theirs_scored):
            ct2_penalty = settings["length_penalty"]
            ours_wins_gnmt = a.score >= b.score
            theirs_wins_ct2 = b.total / len(b.tokens) ** ct2_penalty >= a.total / len(a.tokens) ** ct2_penalty
            penalty_form += ours_wins_gnmt and theirs_wins_ct2
    lengths = [len(ids) + 1 for ids in ours_beam]  # with EOS
    return {
        "preset": preset, "corpus": corpus, "split": "test", "sources": len(sources),
        "mean_output_tokens": round(sum(lengths) / max(1, len(lengths)), 2),
        "greedy_identical": identical(ours_greedy, theirs_greedy),
        "beam_size": settings["beam_size"], "alpha": settings["alpha"],
        "recommended_length_penalty": settings["length_penalty"], "recommended_patience": settings["patience"],
        "beam_identical": identical(ours_beam, recommended), "beam_identical_at_patience_1": patience_1,
        "beam_differing": len(differing), "beam_differing_by_penalty_form": penalty_form,
        "beam_identical_by_length_penalty": {str(lp): n for lp, n in sweep.items()},
        "ours_seconds": round(ours_s, 1), "ctranslate2_seconds": round(theirs_s, 1),
    }


def main():
    import ctranslate2
    import keras

    args = parser.parse_args()
    results = []
    for preset in args.presets:
        with tempfile.TemporaryDirectory() as tmp:
            r = compare(preset, args, os.path.join(tmp, "ct2"))
        results.append(r)
        share = lambda n: f"{n}/{r['sources']} ({100 * n / r['sources']:.1f}%)"  # noqa: E731
        print(f"{preset}: greedy identical {share(r['greedy_identical'])}; beam {r['beam_size']} identical at "
              f"length_penalty {r['recommended_length_penalty']}, patience {r['recommended_patience']} "
              f"{share(r['beam_identical'])}, {r['beam_differing_by_penalty_form']} of the {r['beam_differing']} "
              f"others by the penalty's form; at patience 1 {share(r['beam_identical_at_patience_1'])}; "
              f"by length_penalty {r['beam_identical_by_length_penalty']}", flush=True)
    report = {"benchmark": "ctranslate2_agreement", "cpu": cpu_name(), "cores": os.cpu_count(),
              "ctranslate2": ctranslate2.__version__, "keras": keras.__version__, "backend": keras.backend.backend(),
              "command": "python benchmarks/ctranslate2_agreement.py " + " ".join(sys.argv[1:]), "results": results}
    if args.output:
        write_json(args.output, report)


if __name__ == "__main__":
    main()
