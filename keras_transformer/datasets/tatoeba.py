"""The Tatoeba English-French corpus shipped with the package, and its splits.

Source: Tatoeba sentence pairs as packaged by manythings.org/anki (fra-eng,
2020-08-23), CC-BY 2.0 France; each line keeps its attribution column.

Split rule (deterministic, reproducible with `build()`): pairs are grouped by
their English sentence (lower-cased, whitespace collapsed), so that every
French reference of one English sentence lands in the same split and no test
source is seen in training. A group goes to `test` when the MD5 of its key,
read as a number, is 0-15 mod 1000, to `validation` when it is 16-31, and to
`train` otherwise; the package ships the training pairs whose value is below
500 (about half of them) to stay a few MB.
"""

import gzip
import hashlib
import os

from keras_transformer.data.corpora import read_tsv

FOLDER = os.path.join(os.path.dirname(__file__), "data", "tatoeba_en_fr")
SPLITS = ("train", "validation", "test")


def group_key(english):
    return " ".join(english.lower().split())


def bucket(english):
    return int(hashlib.md5(group_key(english).encode("utf-8")).hexdigest(), 16) % 1000


def split_of(english):
    value = bucket(english)
    return "test" if value < 16 else "validation" if value < 32 else "train"


def full_train_pairs(path):
    """Training pairs of the FULL corpus file: everything but the shipped
    validation and test sources (for training the zoo model)."""
    for english, french in read_tsv(path):
        if split_of(english) == "train":
            yield english, french


def build(source_path, folder=FOLDER, shipped_train_below=500):
    """Writes the shipped split files from the full corpus file."""
    os.makedirs(folder, exist_ok=True)
    outputs = {s: gzip.open(os.path.join(folder, f"{s}.tsv.gz"), "wt", encoding="utf-8", compresslevel=9) for s in SPLITS}
    counts = dict.fromkeys(SPLITS, 0)
    with gzip.open(source_path, "rt", encoding="utf-8") as f:
        for line in f:
            columns = line.rstrip("\n").split("\t")
            if len(columns) < 2:
                continue
            split = split_of(columns[0])
            if split == "train" and bucket(columns[0]) >= shipped_train_below:
                continue
            outputs[split].write(line if line.endswith("\n") else line + "\n")
            counts[split] += 1
    for handle in outputs.values():
        handle.close()
    return counts


if __name__ == "__main__":
    import sys

    print(build(sys.argv[1] if len(sys.argv) > 1 else "../shared/data/tatoeba_en_fr.tsv.gz"))
