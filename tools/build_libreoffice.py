"""Rebuilds the shipped LibreOffice help split files from the full corpus file.

    python tools/build_libreoffice.py libreoffice_help_en_de.tsv.gz

Reads `English<TAB>German<TAB>attribution` lines, puts each in the split of
its help module (`keras_transformer.datasets.libreoffice`), and writes
`train.tsv.gz`, `validation.tsv.gz` and `test.tsv.gz` with the lines copied
verbatim, in their original order. Running it twice gives the same bytes.
"""

import argparse
import gzip
import os

from keras_transformer.datasets import libreoffice


def build(source_path, folder=libreoffice.FOLDER):
    """Writes the split files; returns `{split: pairs written}`."""
    if not os.path.isfile(source_path):
        raise FileNotFoundError(f"No LibreOffice help corpus file. Received: source_path={source_path!r}")
    lines = {split: [] for split in libreoffice.SPLITS}
    with gzip.open(source_path, "rt", encoding="utf-8") as f:
        for line in f:
            columns = line.rstrip("\n").split("\t")
            if len(columns) < 3 or not columns[0].strip() or not columns[1].strip():
                continue
            split = libreoffice.split_of_module(libreoffice.module_of(columns[2]))
            lines[split].append(line if line.endswith("\n") else line + "\n")
    os.makedirs(folder, exist_ok=True)
    for split, kept in lines.items():
        with open(os.path.join(folder, f"{split}.tsv.gz"), "wb") as raw:
            # mtime=0: the same bytes on every run.
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
                f.write("".join(kept).encode("utf-8"))
    return {split: len(kept) for split, kept in lines.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="the full libreoffice_help_en_de.tsv.gz")
    parser.add_argument("--output", default=libreoffice.FOLDER, help="folder for the split files")
    args = parser.parse_args(argv)
    print(build(args.source, args.output))


if __name__ == "__main__":
    main()
