"""Corpora that ship with the package, loadable offline in one call.

`load(name, split)` returns a list of `(source, target)` string tuples.
Shipped:

- `"tatoeba_en_fr"`: English -> French, Tatoeba via manythings.org, CC-BY
  2.0 France; `train` 81,864 pairs, `validation` 2,711, `test` 2,737, split
  by English sentence so no test source is in training
  (`keras_transformer.datasets.tatoeba`).
- `"tatoeba_fr_en"`: the same files read French -> English; training pairs
  whose French sentence is a validation or test source are left out.
- `"libreoffice_en_de"`: English -> German, LibreOffice 7.4 help, MPL-2.0;
  `train` 29,922 pairs, `validation` 1,264, `test` 1,232, split by help
  module (`keras_transformer.datasets.libreoffice`).

Example:

>>> from keras_transformer import datasets
>>> train = datasets.load("tatoeba_en_fr", split="train")     # [(english, french), ...]
>>> sources, references = datasets.load_references("tatoeba_en_fr", "test")
>>> sources[0], references[0]                                  # one English sentence, all its French translations
>>> full = datasets.full_train_pairs("tatoeba_en_fr.tsv.gz")   # the full file minus validation/test sources
"""

import os

from keras_transformer.data.corpora import read_tsv
from keras_transformer.datasets import libreoffice, tatoeba

CORPORA = {tatoeba.NAME: tatoeba, "tatoeba_fr_en": tatoeba, libreoffice.NAME: libreoffice}
# Corpora read from another's files, target -> source.
REVERSED = {"tatoeba_fr_en": "tatoeba_en_fr"}
# Corpora whose shipped training split is a part of a larger file (its name
# upstream), which `full_train_pairs` reads. The others ship whole.
FULL_FILES = {"tatoeba_en_fr": "tatoeba_en_fr.tsv.gz", "tatoeba_fr_en": "tatoeba_en_fr.tsv.gz"}


def _corpus(name, split=None):
    if name not in CORPORA:
        raise ValueError(f"Unknown corpus. Expected one of {sorted(CORPORA)}. Received: name={name!r}")
    module = CORPORA[name]
    if split is not None and split not in module.SPLITS:
        raise ValueError(f"Unknown split. Expected one of {list(module.SPLITS)}. Received: split={split!r}")
    return module


def path(name, split="train"):
    """The shipped `.tsv.gz` file of a split (`source<TAB>target<TAB>attribution`)."""
    return os.path.join(_corpus(name, split).FOLDER, f"{split}.tsv.gz")


def _reverse(pairs, name, split):
    """`(target, source)` pairs; training pairs whose new source is held out are dropped."""
    reversed_pairs = [(target, source) for source, target in pairs]
    if split != "train":
        return reversed_pairs
    held_out = {tatoeba.group_key(s) for split in ("validation", "test") for s in _held_out_sources(name, split)}
    return [pair for pair in reversed_pairs if tatoeba.group_key(pair[0]) not in held_out]


def _held_out_sources(name, split):
    """The sources of a reversed corpus's held-out split: the targets of its files."""
    return [target for _, target in load(REVERSED[name], split)]


def load(name, split="train"):
    """The (source, target) pairs of a shipped corpus split, as a list of tuples.

    Raises:
        ValueError: an unknown `name` or `split` (the message lists the valid ones).
    """
    if name in REVERSED:
        _corpus(name, split)
        return _reverse(load(REVERSED[name], split), name, split)
    return list(read_tsv(path(name, split), strict=True))


def references(pairs):
    """Groups pairs by source, for multi-reference BLEU.

    Returns:
        `(sources, references)`: `references[k]` lists every target given
        for `sources[k]`; sources keep their first-seen order.
    """
    grouped = {}
    for source, target in pairs:
        grouped.setdefault(source, []).append(target)
    return list(grouped), list(grouped.values())


def load_references(name, split="test"):
    """`references(load(name, split))`: each source with all its references."""
    return references(load(name, split))


def full_train_pairs(source_path, name="tatoeba_en_fr"):
    """Training pairs of a corpus's FULL file: all but the shipped validation/test sources."""
    if name in REVERSED:
        return _reverse(list(full_train_pairs(source_path, REVERSED[name])), name, "train")
    module = _corpus(name)
    if name not in FULL_FILES:
        raise ValueError(f"Corpus {name!r} ships whole: use `load({name!r}, 'train')`.")
    return module.full_train_pairs(source_path)
