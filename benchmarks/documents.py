"""Documents on a shipped test split: paragraphs, tags and placeholders.

    python benchmarks/documents.py --output benchmarks/results/documents_cpu.json

With `Translator.from_preset(PRESET)` and its defaults:

- **Paragraphs**: 2-4 consecutive test sources (seeded), each joined to the
  next by a space, or by a line break a third of the time; the references
  joined alike (each source's first). BLEU (sacrebleu) of the paragraphs
  translated as they are today (`split_sentences=False`), translated with
  `split_sentences=True` (the default), and of the sources translated one
  by one and joined alike. How often a paragraph's translation has as many
  sentences as the paragraph (`keras_transformer.translation.sentences.segment`), and
  keeps its line breaks, in place.
- **Tagged**: test sources with a word wrapped in `<b>...</b>` and a
  placeholder (`{0}`, `%s`, `%(name)d`, a URL) after another word,
  translated with `format="html"`: how often the output is well-formed
  XML, holds the tag and the placeholder exactly once, and, tags and
  placeholders taken out, equals the plain source's translation.
- **Bookkeeping**: the share of a call's time spent outside the model (the
  search, `DecodeRunner.decode`, and the alignments' pass,
  `DecodeRunner.links`): cutting sentences, framing whitespace, markup and
  placeholders, joining, for the paragraphs and for the tagged texts.

Where a tag lands on a model whose alignment is known (the permuting
test model) is measured by
tests/test_documents.py::test_tags_land_around_the_word_they_wrapped_on_the_permuting_model.
The machine's load average is recorded before and after: timings on a
busy machine are shares of the same run, not absolute speeds.
"""

import argparse
import os
import random
import re
import sys
import time
import xml.etree.ElementTree as ElementTree

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_name, write_json  # noqa: E402

PRESET = "tatoeba_en_fr"
PLACEHOLDERS = ("{0}", "%s", "%(name)d", "https://example.org/a?b=1")


def paragraphs(sources, references, rng):
    """`[(paragraph, reference, [sources], separators)]` of 2-4 consecutive sources."""
    out, start = [], 0
    while start + 2 <= len(sources):
        size = rng.randint(2, 4)
        group, refs = sources[start:start + size], references[start:start + size]
        start += len(group)
        separators = [" " if rng.random() >= 1 / 3 else "\n" for _ in group[1:]]
        out.append((join(group, separators), join(refs, separators), group, separators))
    return out


def join(texts, separators):
    return texts[0] + "".join(s + t for s, t in zip(separators, texts[1:]))


def tagged(source, rng):
    """`(document, placeholder)`: `source` escaped, a word in `<b>`, a placeholder after another word."""
    words = source.split()
    escaped = [w.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") for w in words]
    b, p = rng.randrange(len(words)), rng.randrange(len(words))
    placeholder = rng.choice(PLACEHOLDERS)
    escaped[b] = f"<b>{escaped[b]}</b>"
    escaped[p] += " " + placeholder
    return " ".join(escaped), placeholder


def stripped(text, placeholder):
    """`text` without tags and its placeholder, entities decoded, spaces collapsed."""
    text = re.sub(r"</?b>", "", text).replace(placeholder, " ")
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return " ".join(text.split())


def timed(translator, call):
    """`(outputs, seconds, seconds in the model)` of `call()`: the model's
    time is the search's (`DecodeRunner.decode`) and the alignments' pass
    (`DecodeRunner.links`)."""
    runner, spent = translator.runner, [0.0]

    def timing(method):
        def timed_method(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start
        return timed_method

    runner.decode, runner.links = timing(runner.decode), timing(runner.links)
    try:
        start = time.perf_counter()
        outputs = call()
        return outputs, time.perf_counter() - start, spent[0]
    finally:
        del runner.decode, runner.links


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tagged", type=int, default=500, help="tagged sources")
    parser.add_argument("--limit", type=int, default=None, help="the first N test sources for the paragraphs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=None, help="a JSON file for the results")
    args = parser.parse_args(argv)

    import sacrebleu

    from keras_transformer import Translator, datasets
    from keras_transformer.translation.sentences import segment

    load = os.getloadavg()
    sources, references = datasets.load_references(PRESET, "test")
    references = [r[0] for r in references]
    sources, references = sources[:args.limit], references[:args.limit]
    rng = random.Random(args.seed)
    groups = paragraphs(sources, references, rng)
    texts = [p for p, *_ in groups]
    translator = Translator.from_preset(PRESET)
    whole = Translator(translator.model, translator.tokenizer, split_sentences=False)
    translator.translate(texts[:8]), whole.translate(texts[:8])  # compiled before timing
    split, split_s, split_model = timed(translator, lambda: translator.translate(texts))
    today = whole.translate(texts)
    alone = dict(zip(sources, translator.translate(sources)))
    one_by_one = [join([alone[s] for s in group], separators) for _, _, group, separators in groups]
    refs = [[r for _, r, *_ in groups]]
    breaks = [p for p in range(len(texts)) if "\n" in texts[p]]
    result = {
        "preset": PRESET, "cpu": cpu_name(), "load_average_before": load, "seed": args.seed,
        "paragraphs": {
            "count": len(texts), "with_line_breaks": len(breaks),
            "bleu_today": round(sacrebleu.corpus_bleu(today, refs).score, 2),
            "bleu_split_sentences": round(sacrebleu.corpus_bleu(split, refs).score, 2),
            "bleu_sentence_by_sentence": round(sacrebleu.corpus_bleu(one_by_one, refs).score, 2),
            "sentences_kept": sum(len(segment(o)[1]) == len(segment(t)[1]) for o, t in zip(split, texts)) / len(texts),
            "line_breaks_kept": sum(split[p].count("\n") == texts[p].count("\n") for p in breaks) / max(1, len(breaks)),
            "line_breaks_kept_today": sum(today[p].count("\n") == texts[p].count("\n") for p in breaks)
            / max(1, len(breaks)),
            "seconds": round(split_s, 2), "bookkeeping_share": round(1 - split_model / split_s, 4),
        },
    }
    chosen = rng.sample(range(len(sources)), min(args.tagged, len(sources)))
    documents = [tagged(sources[i], rng) for i in chosen]
    outputs, html_s, html_model = timed(translator, lambda: translator.translate([d for d, _ in documents],
                                                                                 format="html"))
    plain = translator.translate([stripped(d, p) for d, p in documents])
    well_formed = once = equal = 0
    for (document, placeholder), output, expected in zip(documents, outputs, plain):
        try:
            ElementTree.fromstring(f"<r>{output}</r>")
            well_formed += 1
        except ElementTree.ParseError:
            pass
        once += output.count("<b>") == output.count("</b>") == 1 and output.count(placeholder) == 1
        equal += stripped(output, placeholder) == " ".join(expected.split())
    count = len(documents)
    result["tagged"] = {
        "count": count, "well_formed": well_formed / count, "tag_and_placeholder_once": once / count,
        "stripped_equals_plain": equal / count, "seconds": round(html_s, 2),
        "bookkeeping_share": round(1 - html_model / html_s, 4),
    }
    result["load_average_after"] = os.getloadavg()
    print(result)
    if args.output:
        write_json(args.output, result)


if __name__ == "__main__":
    main()
