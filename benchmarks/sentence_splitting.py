"""Sentence splitters on the shipped splits: our rule beside the packages.

Which splitter should cut a paragraph into the sentences our models learned
from? Candidates: our rule (`keras_transformer.translation.sentences`, which also runs
in the SavedModel's graph), the rule it replaced (a sentence end followed by
whitespace, the old long-input split), and the packages pysbd, sentencex,
sentence-splitter (Moses' rules), segtok and blingfire:

    pip install pysbd sentencex sentence-splitter segtok blingfire
    python benchmarks/sentence_splitting.py --output benchmarks/results/sentence_splitting.json

The texts: each side of the shipped test and validation splits, English
and French (tatoeba_en_fr), English and German (libreoffice_en_de), each
distinct text once. A text's true number of sentences is the one that the
five packages agree on by a strict majority; where they do not, or where
the majority is wrong, it is a hand label (`HAND_LABELS`, which names each
text it labels). Our rule was written looking at the test splits; the
validation splits were held out.

The measures, per side:
- **texts**: how often a splitter finds a text's true number of sentences;
- **paragraphs**: 2-4 consecutive texts (seeded), each joined to the next by
  a space, or by a line break (a third of the time, and always after a text
  that has no sentence end, such as a heading): how often a splitter finds
  the paragraph's true number (the sum of its texts'). Every splitter cuts
  at line breaks first, as the `Translator` does;
- **speed**: microseconds per text.
"""

import argparse
import collections
import gzip
import os
import random
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_name, write_json  # noqa: E402

PACKAGES = ("pysbd", "sentencex", "moses", "segtok", "blingfire")
SIDES = (("tatoeba_en_fr", 0, "en"), ("tatoeba_en_fr", 1, "fr"), ("libreoffice_en_de", 0, "en"),
         ("libreoffice_en_de", 1, "de"))
# Texts on which the packages have no strict majority, or a wrong one: the
# start of each text and its number of sentences.
HAND_LABELS = {
    "« Je peux peut-être me joindre à vous ? » « Pourquoi pas": 2,
    "« Est-ce qu'elle joue au tennis ? » « Oui, elle y joue.": 2,
    "(max.) Zeilen": 1,
    "« Est-il sérieusement malade ? » « J'espère que non. »": 2,
    "« Le téléphone sonne. » « Je vais répondre. »": 2,
    "« Le téléphone sonne. » « Je prends. »": 2,
    "« J'ai envie de jouer aux cartes. » « Moi aussi. »": 2,
    "«Tu me trouves comment ?» «Très jolie.»": 2,
    "Exponential trend line: regression through equation y=b∙exp": 3,  # ".This" lacks its space
    "Wählen Sie bei markiertem Objekt Format – Textattribute… Der": 2,
}
# The old long-input split: a sentence end, then whitespace.
OLD_END = re.compile(r"([.!?\u2026]+[\"')\]\u00bb\u201d\u2019]*)\s+")

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--splits", nargs="+", default=["test", "validation"])
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--output", default=None, help="a JSON file for the results")


def splitters(language):
    """`{name: text -> sentences}` for one language (one line at a time)."""
    import blingfire
    import pysbd
    import segtok.segmenter
    import sentence_splitter
    import sentencex

    from keras_transformer.translation.sentences import segment

    sbd, moses = pysbd.Segmenter(language=language, clean=False), sentence_splitter.SentenceSplitter(language)
    kept = lambda pieces: [p for p in pieces if p.strip()]  # noqa: E731
    return {
        "ours": lambda t: segment(t)[1],
        "old rule": lambda t: kept(OLD_END.sub("\\1\x1e", t).split("\x1e")),
        "pysbd": lambda t: kept(sbd.segment(t)),
        "sentencex": lambda t: kept(sentencex.segment(language, t)),
        "moses": lambda t: kept(moses.split(t)),
        "segtok": lambda t: kept(segtok.segmenter.split_single(t)),
        "blingfire": lambda t: kept(blingfire.text_to_sentences(t).split("\n")),
    }


def texts(corpus, column, split):
    """The distinct texts of one side of a shipped split, in order."""
    from keras_transformer import datasets

    with gzip.open(datasets.path(corpus, split), "rt", encoding="utf-8") as f:
        return list(dict.fromkeys(line.rstrip("\n").split("\t")[column] for line in f))


def true_count(text, counts):
    """`text`'s number of sentences: the packages' strict majority or a hand label."""
    label = hand_label(text)
    if label is not None:
        return label
    (value, votes), *_ = collections.Counter(counts[name] for name in PACKAGES).most_common()
    if votes * 2 <= len(PACKAGES):
        raise ValueError(f"No majority and no hand label for {text!r}: {counts}")
    return value


def hand_label(text):
    """`HAND_LABELS`' count for `text` (its spaces read as plain ones), else None."""
    plain = re.sub(r"\s", " ", text)
    return next((label for start, label in HAND_LABELS.items() if plain.startswith(start)), None)


def paragraphs(items, rng):
    """`[(paragraph, true count)]` of 2-4 consecutive `(text, count)` items."""
    out, start = [], 0
    while start + 2 <= len(items):
        group = items[start:start + rng.randint(2, 4)]
        start += len(group)
        text = group[0][0]
        for (previous, _), (following, _) in zip(group, group[1:]):
            ends = OLD_END.match(previous[-1] + " ") is not None
            text += (" " if ends and rng.random() >= 1 / 3 else "\n") + following
        out.append((text, sum(count for _, count in group)))
    return out


def by_lines(split, text):
    return [s for line in text.split("\n") for s in split(line)]


def measure(corpus, column, language, split, seed):
    names = splitters(language)
    items = texts(corpus, column, split)
    counts, seconds = {name: [] for name in names}, {}
    for name, splitter in names.items():
        start = time.perf_counter()
        counts[name] = [len(splitter(t)) for t in items]
        seconds[name] = time.perf_counter() - start
    truth = [true_count(t, {name: counts[name][i] for name in names}) for i, t in enumerate(items)]
    groups = paragraphs(list(zip(items, truth)), random.Random(seed))
    result = {"corpus": corpus, "side": "source" if column == 0 else "target", "language": language, "split": split,
              "texts": len(items), "paragraphs": len(groups),
              "hand_labelled": sum(hand_label(t) is not None for t in items),
              "with_line_breaks": sum("\n" in p for p, _ in groups), "splitters": {}}
    for name, splitter in names.items():
        right = sum(c == t for c, t in zip(counts[name], truth))
        found = sum(len(by_lines(splitter, p)) == count for p, count in groups)
        result["splitters"][name] = {
            "texts_right_pct": round(100 * right / len(items), 2),
            "paragraphs_right_pct": round(100 * found / len(groups), 2),
            "us_per_text": round(1e6 * seconds[name] / len(items), 1),
            "wrong_texts": [t for c, t, truth_count in zip(counts[name], items, truth) if c != truth_count][:5],
        }
    return result


def main():
    args = parser.parse_args()
    results = [measure(corpus, column, language, split, args.seed)
               for split in args.splits for corpus, column, language in SIDES]
    names = list(results[0]["splitters"])
    print("| split | side | texts / paragraphs | " + " | ".join(names) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in names) + " |")
    for r in results:
        cells = [f"{r['splitters'][n]['texts_right_pct']:.1f} / {r['splitters'][n]['paragraphs_right_pct']:.1f}"
                 for n in names]
        print(f"| {r['split']} | {r['corpus']} {r['language']} | {r['texts']} / {r['paragraphs']} | "
              + " | ".join(cells) + " |")
    speed = {n: round(sum(r["splitters"][n]["us_per_text"] * r["texts"] for r in results)
                      / sum(r["texts"] for r in results), 1) for n in names}
    print("µs per text: " + ", ".join(f"{n} {s}" for n, s in speed.items()))
    if args.output:
        write_json(args.output, {"cpu": cpu_name(), "seed": args.seed, "us_per_text": speed, "results": results})


if __name__ == "__main__":
    main()
