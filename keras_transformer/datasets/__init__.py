"""Corpora that ship with the package, loadable offline in one call.

Example:

>>> from keras_transformer import datasets
>>> train = datasets.load("tatoeba_en_fr", split="train")   # [(english, french), ...]
>>> test = datasets.load("tatoeba_en_fr", split="test")
>>> sources, references = datasets.references(test)          # all French references per source
"""

import os

from keras_transformer.datasets import tatoeba

CORPORA = {"tatoeba_en_fr": tatoeba}


def load(name, split="train"):
    """The (source, target) pairs of a shipped corpus split, as a list."""
    from keras_transformer.data.corpora import read_tsv

    if name not in CORPORA:
        raise ValueError(f"Unknown corpus. Expected one of {sorted(CORPORA)}. Received: name={name!r}")
    module = CORPORA[name]
    if split not in module.SPLITS:
        raise ValueError(f"Unknown split. Expected one of {list(module.SPLITS)}. Received: split={split!r}")
    return list(read_tsv(os.path.join(module.FOLDER, f"{split}.tsv.gz")))


def references(pairs):
    """Groups pairs by source: `(sources, references)` where
    `references[k]` lists every target given for `sources[k]`, for
    multi-reference BLEU. Sources keep their first-seen order."""
    grouped = {}
    for source, target in pairs:
        grouped.setdefault(source, []).append(target)
    return list(grouped), list(grouped.values())
