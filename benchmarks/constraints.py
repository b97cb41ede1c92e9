"""Terminology constraints on a shipped test split: are they met, what do
they do to BLEU, and what does each cost in speed.

For each preset: its test split's sources are translated without
constraints (`Translator` defaults: beam 4, alpha 0.6). From the first
sources whose reference has a word absent from that translation, `--count`
are kept, each with its longest such word (the first of equal length; a
word is a run of letters or digits). They are translated again with that
word as their one constraint, and the table gives how many outputs hold
it as a word and as a substring (a constraint can be met inside a longer
word: "soir" in "soirée"), and corpus BLEU against the references with and
without constraints.

Speed: the same sources translated with 0, 1, 2 and 3 constraints each
(their reference's longest words, absent or not; fewer where the
reference has fewer), the median of `--repeats` timed runs after an
untimed one (which traces the graph for each number of constraints).

    python benchmarks/constraints.py --output benchmarks/results/constraints_cpu.json
"""

import argparse
import os
import re
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_name, write_json  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--presets", nargs="+", default=["tatoeba_en_fr", "libreoffice_en_de"])
parser.add_argument("--count", type=int, default=200, help="sources constrained per preset")
parser.add_argument("--repeats", type=int, default=3, help="timed runs per number of constraints")
parser.add_argument("--max-constraints", type=int, default=3)
parser.add_argument("--output", default=None, help="a JSON file for the results")

WORD = re.compile(r"[^\W_]+")


def words(text):
    return WORD.findall(text)


def longest_first(candidates):
    """`candidates`, longest first, the first of equal length first, each once."""
    unique = list(dict.fromkeys(candidates))
    return sorted(unique, key=lambda w: -len(w))


def pick(sources, references, translations, count):
    """The first `count` sources whose (first) reference has a word absent
    from their translation: `(index, word)`, the longest such word."""
    picked = []
    for index, (reference, output) in enumerate(zip(references, translations)):
        absent = [w for w in longest_first(words(reference[0])) if w not in set(words(output))]
        if absent:
            picked.append((index, absent[0]))
        if len(picked) == count:
            break
    return picked


def timed(fn, repeats):
    fn()  # traces the graph for this shape of steering
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), runs


def run_preset(preset, args):
    from keras_transformer import Translator, datasets
    from keras_transformer.models import presets
    from keras_transformer.evaluation import corpus_bleu

    corpus = presets.load_metadata(preset).get("data", {}).get("corpus", preset)
    sources, references = datasets.references(datasets.load(corpus, "test"))
    translator = Translator.from_preset(preset)
    plain = translator.translate(sources)
    picked = pick(sources, references, plain, args.count)
    chosen_sources = [sources[i] for i, _ in picked]
    chosen_references = [references[i] for i, _ in picked]
    constraints = [[word] for _, word in picked]
    constrained = translator.translate(chosen_sources, constraints=constraints)
    as_word = sum(word in words(output) for (_, word), output in zip(picked, constrained))
    as_substring = sum(word in output for (_, word), output in zip(picked, constrained))
    unconstrained = [plain[i] for i, _ in picked]
    result = {
        "preset": preset, "sources": len(picked), "test_split": len(sources),
        "met_as_word": as_word, "met_as_substring": as_substring,
        "bleu_unconstrained": corpus_bleu(unconstrained, chosen_references)[0].score,
        "bleu_constrained": corpus_bleu(constrained, chosen_references)[0].score,
        "examples": [{"source": s, "constraint": c[0], "unconstrained": u, "constrained": o}
                     for s, c, u, o in list(zip(chosen_sources, constraints, unconstrained, constrained))[:5]],
        "speed": [],
    }
    for n in range(args.max_constraints + 1):
        steering = None if n == 0 else [longest_first(words(r[0]))[:n] for r in chosen_references]
        median, runs = timed(lambda: translator.translate(chosen_sources, constraints=steering), args.repeats)
        result["speed"].append({"constraints": n, "seconds": median, "runs": runs,
                                "sentences_per_second": len(chosen_sources) / median})
    return result


def main():
    args = parser.parse_args()
    import keras

    results = [run_preset(preset, args) for preset in args.presets]
    print("| preset | sources | met as a word | met as a substring | BLEU without | BLEU with |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['preset']} | {r['sources']} | {r['met_as_word']} | {r['met_as_substring']} | "
              f"{r['bleu_unconstrained']:.1f} | {r['bleu_constrained']:.1f} |")
    print("\n| preset | " + " | ".join(f"{s['constraints']} constraints" for s in results[0]["speed"]) + " |")
    print("| --- |" + " --- |" * len(results[0]["speed"]))
    for r in results:
        base = r["speed"][0]["seconds"]
        print(f"| {r['preset']} | " + " | ".join(
            f"{s['sentences_per_second']:.1f} sent/s ({s['seconds'] / base:.2f}×)" for s in r["speed"]) + " |")
    if args.output:
        write_json(args.output, {
            "benchmark": "constraints", "command": "python " + " ".join(sys.argv),
            "machine": {"cpu": cpu_name(), "cores": os.cpu_count()}, "backend": keras.backend.backend(),
            "beam_size": 4, "results": results,
        })


if __name__ == "__main__":
    main()
