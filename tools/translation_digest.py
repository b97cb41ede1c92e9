"""Translates the shipped presets' test splits and writes every output and score.

    KERAS_BACKEND=jax python tools/translation_digest.py --output /tmp/jax.json
    python tools/translation_digest.py --stop exact --output /tmp/after.json
    python tools/translation_digest.py --compare /tmp/before.json /tmp/after.json

Each preset's `Translator` with its defaults (beam 4, alpha 0.6) translates
the sources of its corpus's test split (`datasets.load_references`) with
`hypotheses(n_best=2)`: each sentence's two best texts and scores;
`--stop` sets beam search's stop rule (default: the `Translator`'s), which
the digest records. Two files of a change, before and after, show whether
it changed what users get: `--compare` prints the sentences whose texts
differ and the largest score difference, and exits with 1 if any text
differs.
"""

import argparse
import json
import sys
import time

PRESETS = ("tatoeba_en_fr", "tatoeba_fr_en", "libreoffice_en_de")


def digest(presets, limit, stop=None):
    import keras

    from keras_transformer import Translator, datasets

    options = {} if stop is None else {"stop": stop}
    result = {"backend": keras.backend.backend(), "presets": {}}
    for name in presets:
        sources = datasets.load_references(name, "test")[0][:limit]
        translator = Translator.from_preset(name, **options)
        result["stop"] = translator.stop
        start = time.perf_counter()
        rows = translator.hypotheses(sources, n_best=2)
        seconds = time.perf_counter() - start
        result["presets"][name] = {
            "seconds": round(seconds, 2),
            "texts": [[h.text for h in row] for row in rows],
            "scores": [[h.score for h in row] for row in rows],
        }
        print(f"{name}: {len(sources)} sources in {seconds:.1f} s", flush=True)
    return result


def compare(before_path, after_path):
    """Prints the differences of two digests; True if every text is equal."""
    with open(before_path) as f:
        before = json.load(f)
    with open(after_path) as f:
        after = json.load(f)
    same = True
    rules = [digest.get("stop", "exact") for digest in (before, after)]  # older digests: the exact rule
    if rules[0] != rules[1]:
        print(f"The digests' stop rules differ: {rules[0]} and {rules[1]}")
    for name, old in before["presets"].items():
        if name not in after["presets"]:  # a digest of fewer presets (--presets)
            print(f"{name}: not in {after_path}")
            continue
        new = after["presets"][name]
        differ = [i for i, (a, b) in enumerate(zip(old["texts"], new["texts"])) if a != b]
        gap = max(abs(a - b) for x, y in zip(old["scores"], new["scores"]) for a, b in zip(x, y))
        print(f"{name}: {len(differ)} of {len(old['texts'])} sentences differ; largest score difference {gap:.2e}")
        for i in differ[:10]:
            print(f"  {i}: {old['texts'][i]} {old['scores'][i]}\n  {' ' * len(str(i))}  {new['texts'][i]} {new['scores'][i]}")
        same = same and not differ
    return same


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--limit", type=int, default=None, help="the first N sources of each split")
    parser.add_argument("--stop", choices=("exact", "early"), default=None,
                        help="beam search's stop rule (default: the Translator's)")
    parser.add_argument("--output", help="the digest's JSON file")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    if args.compare:
        return 0 if compare(*args.compare) else 1
    if not args.output:
        parser.error("--output is required unless --compare is given")
    result = digest(args.presets, args.limit, args.stop)
    with open(args.output, "w") as f:
        json.dump(result, f, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
