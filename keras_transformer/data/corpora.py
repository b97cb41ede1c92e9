"""Parallel corpora: TSV files, aligned text files, TensorFlow Datasets WMT14."""

import dataclasses
import gzip
import os


@dataclasses.dataclass
class ReadReport:
    """What a reader skipped, by kind, with file and line of the first few."""

    pairs: int = 0
    skipped: dict = dataclasses.field(default_factory=dict)  # kind -> count
    examples: list = dataclasses.field(default_factory=list)  # (path, line, kind)
    max_examples: int = 20

    def skip(self, path, line, kind):
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        if len(self.examples) < self.max_examples:
            self.examples.append((path, line, kind))

    def __str__(self):
        if not self.skipped:
            return f"{self.pairs} pairs read, none skipped"
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.skipped.items()))
        where = "; ".join(f"{p}:{n} {k}" for p, n, k in self.examples[:5])
        return f"{self.pairs} pairs read; skipped {kinds} (first: {where})"


def _open_lines(path):
    """Yields (line_number, raw bytes line without newline) of a plain or gzip file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No corpus file at {path!r}")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        for number, line in enumerate(f, 1):
            yield number, line.rstrip(b"\r\n")


def _decode(raw, path, number, report, strict):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        if strict:
            raise ValueError(f"{path}:{number}: invalid UTF-8") from None
        report.skip(path, number, "invalid UTF-8")
        return None


def _check_pair(source, target, path, number, report, strict):
    source, target = source.strip(), target.strip()
    if source and target:
        report.pairs += 1
        return source, target
    kind = "empty line" if not source and not target else "pair with an empty side"
    if strict:
        raise ValueError(f"{path}:{number}: {kind}")
    report.skip(path, number, kind)
    return None


def read_tsv(path, report=None, strict=False, reverse=False):
    """Yields (source, target) from `source<TAB>target[<TAB>...]` lines.

    Extra columns are ignored. Bad lines (empty, no tab, an empty side,
    invalid UTF-8) are skipped and counted in `report` with file and line,
    or raise `ValueError` naming them when `strict=True`. `reverse=True`
    swaps the columns (target -> source).

    Example:

    >>> report = ReadReport()
    >>> pairs = list(read_tsv("train.tsv.gz", report))
    >>> print(report)
    """
    report = report if report is not None else ReadReport()
    for number, raw in _open_lines(path):
        line = _decode(raw, path, number, report, strict)
        if line is None:
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            kind = "empty line" if not line.strip() else "line without a tab"
            if strict:
                raise ValueError(f"{path}:{number}: {kind}")
            report.skip(path, number, kind)
            continue
        pair = _check_pair(columns[0], columns[1], path, number, report, strict)
        if pair:
            yield pair[::-1] if reverse else pair


def read_aligned(source_path, target_path, report=None, strict=False):
    """Yields (source, target) from two files aligned line by line."""
    report = report if report is not None else ReadReport()
    sources, targets = _open_lines(source_path), _open_lines(target_path)
    for (number, raw_source), (_, raw_target) in zip(sources, targets):
        source = _decode(raw_source, source_path, number, report, strict)
        target = _decode(raw_target, target_path, number, report, strict)
        if source is None or target is None:
            continue
        pair = _check_pair(source, target, source_path, number, report, strict)
        if pair:
            yield pair
    leftover = next(sources, None) or next(targets, None)
    if leftover is not None:
        message = f"{source_path} and {target_path} have different numbers of lines"
        if strict:
            raise ValueError(message)
        report.skip(source_path, leftover[0], "misaligned tail")


WMT14_PAIRS = ("de-en", "fr-en")


def load_wmt14(pair="de-en", source="en", split="train", data_dir=None, manual_dir=None):
    """(source, target) string pairs of TensorFlow Datasets' `wmt14_translate`.

    Args:
        pair: `"de-en"` or `"fr-en"`.
        source: the source language, either side of `pair`.
        split: `"train"`, `"validation"` or `"test"` (newstest2014).
        data_dir, manual_dir: passed to TFDS.

    Raises a `RuntimeError` that says which files to place where when the
    data cannot be downloaded (an offline machine).
    """
    import tensorflow_datasets as tfds

    if pair not in WMT14_PAIRS:
        raise ValueError(f"Argument `pair` must be one of {WMT14_PAIRS}. Received: pair={pair!r}")
    languages = pair.split("-")
    if source not in languages:
        raise ValueError(f"Argument `source` must be one of {languages}. Received: source={source!r}")
    target = languages[1 - languages.index(source)]
    name = f"wmt14_translate/{pair}"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
        dataset = builder.as_dataset(split=split)
    except Exception as error:  # noqa: BLE001 - explained below
        raise RuntimeError(
            f"Could not prepare TensorFlow Datasets {name!r} ({type(error).__name__}: {error}). "
            "On a machine without internet access, download the WMT14 archives listed in "
            "tensorflow_datasets/translate/wmt14.py (training-parallel-*.tgz, dev.tgz, test-full.tgz) "
            f"elsewhere and place them in manual_dir={manual_dir!r} (or run once with network and "
            f"copy data_dir={data_dir or '~/tensorflow_datasets'!r}). To train offline now, use the "
            "shipped corpus: keras_transformer.datasets.load('tatoeba_en_fr')."
        ) from error
    for example in tfds.as_numpy(dataset):
        yield example[source].decode("utf-8"), example[target].decode("utf-8")
