"""The Tatoeba English-French corpus shipped with the package, and its split rule.

Source: Tatoeba sentence pairs as packaged by manythings.org/anki (fra-eng;
data/tatoeba_en_fr/README.md names the release), CC-BY 2.0 France; every
shipped line keeps its attribution.

Split rule (deterministic; `build_tatoeba.py` rebuilds the shipped files):
pairs are grouped by their English sentence, normalized by `group_key`
(lower-cased, whitespace collapsed), so every French reference of one English
sentence lands in the same split and no test source is seen in training.
`bucket(english)` is the MD5 of the key, read as a number, modulo 1000:

- 0-15: `test` (about 2,000 English sources),
- 16-31: `validation` (about 2,000 English sources),
- 32-999: training; the package ships the training groups with bucket < 500
  (about half, 81,864 pairs) to stay small; `full_train_pairs` yields all of
  them from the full file.

Example:

>>> split_of("I love you.")
'train'
>>> pairs = list(full_train_pairs("/data/tatoeba_en_fr.tsv.gz"))   # ~168,000 pairs
"""

import hashlib
import os

from keras_transformer.data.corpora import read_tsv

NAME = "tatoeba_en_fr"
FOLDER = os.path.join(os.path.dirname(__file__), "data", NAME)
SPLITS = ("train", "validation", "test")
TEST_BELOW = 16
VALIDATION_BELOW = 32
SHIPPED_TRAIN_BELOW = 500


def group_key(english):
    """The normalized English sentence that groups references."""
    return " ".join(english.lower().split())


def bucket(english):
    """0-999, a stable hash of the group key."""
    return int(hashlib.md5(group_key(english).encode("utf-8")).hexdigest(), 16) % 1000


def split_of(english):
    """`"test"`, `"validation"` or `"train"` for an English sentence."""
    value = bucket(english)
    return "test" if value < TEST_BELOW else "validation" if value < VALIDATION_BELOW else "train"


def full_train_pairs(path, report=None):
    """(english, french) training pairs of the FULL corpus file.

    Everything except the shipped validation and test English sources (all
    their references), for training on the whole corpus.

    Args:
        path: the full `tatoeba_en_fr.tsv.gz` (174,916 pairs).
        report: optional `ReadReport` for skipped lines.
    """
    for english, french in read_tsv(path, report):
        if split_of(english) == "train":
            yield english, french
