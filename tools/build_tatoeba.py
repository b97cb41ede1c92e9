"""Rebuilds the shipped Tatoeba split files from the full corpus file.

    python tools/build_tatoeba.py tatoeba_en_fr.tsv.gz [--output FOLDER]

Reads `English<TAB>French<TAB>attribution` lines, applies the split rule of
`keras_transformer.datasets.tatoeba` and writes `train.tsv.gz`,
`validation.tsv.gz` and `test.tsv.gz` (lines copied verbatim, attribution
included, in their original order). Running it twice gives the same content.
"""

import argparse
import gzip
import os

from keras_transformer.datasets import tatoeba


def build(source_path, folder=tatoeba.FOLDER, shipped_train_below=tatoeba.SHIPPED_TRAIN_BELOW):
    """Writes the split files; returns `{split: pairs written}`."""
    if not os.path.isfile(source_path):
        raise FileNotFoundError(f"No Tatoeba corpus file. Received: source_path={source_path!r}")
    os.makedirs(folder, exist_ok=True)
    counts = dict.fromkeys(tatoeba.SPLITS, 0)
    outputs = {}
    try:
        for split in tatoeba.SPLITS:
            # mtime=0: the same bytes on every run.
            raw = open(os.path.join(folder, f"{split}.tsv.gz"), "wb")
            outputs[split] = (raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0))
        with gzip.open(source_path, "rt", encoding="utf-8") as f:
            for line in f:
                columns = line.rstrip("\n").split("\t")
                if len(columns) < 2 or not columns[0].strip() or not columns[1].strip():
                    continue
                split = tatoeba.split_of(columns[0])
                if split == "train" and tatoeba.bucket(columns[0]) >= shipped_train_below:
                    continue
                outputs[split][1].write((line if line.endswith("\n") else line + "\n").encode("utf-8"))
                counts[split] += 1
    finally:
        for raw, compressed in outputs.values():
            compressed.close()
            raw.close()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="the full tatoeba_en_fr.tsv.gz")
    parser.add_argument("--output", default=tatoeba.FOLDER, help="folder for the split files")
    args = parser.parse_args(argv)
    print(build(args.source, args.output))


if __name__ == "__main__":
    main()
