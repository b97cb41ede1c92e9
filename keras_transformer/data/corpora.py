"""Parallel corpora read as (source, target) string pairs: TSV and aligned files.

Files may be plain or gzip (`.gz`), their lines ending in `\n`, `\r\n` or
`\r`. Bad lines never stop a pass: each is
skipped and counted in a `ReadReport` with its file and line number, or, with
`strict=True`, raises a `ValueError` naming them. WMT14 through TensorFlow
Datasets is in `keras_transformer.data.wmt14`.

Example:

>>> report = ReadReport()
>>> pairs = list(read_tsv("train.tsv.gz", report))          # [(source, target), ...]
>>> pairs += list(read_aligned("news.en", "news.fr", report))
>>> print(report)     # 41230 pairs read; skipped 3 line without a tab (first: train.tsv.gz:17 ...)
"""

import gzip
import itertools
import os
import zlib


class ReadReport:
    """What readers kept and skipped: full counts, a few examples per kind.

    Attributes:
        pairs: int. Pairs yielded.
        skipped: dict kind -> count, e.g. `{"line without a tab": 3}`.
        examples: list of `(path, line_number, kind)`, at most
            `max_examples` per kind.
    """

    KINDS = (
        "empty line", "line without a tab", "pair with an empty side", "invalid UTF-8",
        "misaligned line", "unreadable file",
    )

    def __init__(self, max_examples=20):
        self.pairs = 0
        self.skipped = {}
        self.examples = []
        self.max_examples = max_examples

    @property
    def total_skipped(self):
        return sum(self.skipped.values())

    def skip(self, path, line, kind):
        count = self.skipped.get(kind, 0)
        self.skipped[kind] = count + 1
        if count < self.max_examples:
            self.examples.append((os.fspath(path), line, kind))

    def __repr__(self):
        return f"ReadReport(pairs={self.pairs}, skipped={self.skipped})"

    def __str__(self):
        if not self.skipped:
            return f"{self.pairs} pairs read, none skipped"
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(self.skipped.items()))
        where = "; ".join(f"{p}:{n} {k}" for p, n, k in self.examples[:5])
        return f"{self.pairs} pairs read; skipped {kinds} (first: {where})"


def _problem(report, strict, path, line, kind, detail=""):
    if strict:
        raise ValueError(f"{os.fspath(path)}:{line}: {kind}{detail}")
    report.skip(path, line, kind)


def _lines(f):
    """The lines of the binary file `f`, without their ends: `\n`, `\r\n`
    or a lone `\r` (old Mac files), as Python's universal newlines split
    text; a line break is nothing else (not `\x0b`, `\x1c` or U+2028)."""
    for line in f:
        parts = line.removesuffix(b"\n").removesuffix(b"\r").split(b"\r")
        yield from parts


def _open_lines(path, report, strict):
    """Yields (line_number, bytes without newline); a corrupt file ends early, reported."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No corpus file. Received: path={path!r}")
    opener = gzip.open if path.endswith(".gz") else open
    number = 0
    try:
        with opener(path, "rb") as f:
            for number, line in enumerate(_lines(f), 1):
                if number == 1:
                    line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
                yield number, line
    except (OSError, EOFError, zlib.error) as error:  # truncated or corrupt gzip
        _problem(report, strict, path, number + 1, "unreadable file", f" ({type(error).__name__}: {error})")


def _decode(raw, path, number, report, strict):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        _problem(report, strict, path, number, "invalid UTF-8", f" (byte {error.start})")
        return None


def _pair(source, target, path, number, report, strict):
    source, target = source.strip(), target.strip()
    if source and target:
        report.pairs += 1
        return source, target
    _problem(report, strict, path, number, "empty line" if not source and not target else "pair with an empty side")
    return None


def read_tsv(path, report=None, strict=False, reverse=False, columns=(0, 1), numbered=False):
    """Yields (source, target) from `source<TAB>target[<TAB>more...]` lines.

    Args:
        path: a TSV file, plain or `.gz`.
        report: a `ReadReport` that counts skipped lines (shared across
            calls to sum up several files).
        strict: raise `ValueError("file:line: kind")` on the first bad line
            instead of skipping it.
        reverse: swap the two columns (read `target<TAB>source`).
        columns: the two different column indices (>= 0) to read; extra
            columns (e.g. an attribution) are ignored.
        numbered: yield `(line_number, (source, target))` instead.

    Raises:
        FileNotFoundError: naming `path` when it does not exist.
    """
    if (
        len(columns) != 2
        or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in columns)
        or columns[0] == columns[1]
    ):
        raise ValueError(f"Argument `columns` must be two different indices >= 0. Received: columns={columns!r}")
    report = report if report is not None else ReadReport()
    needed = max(columns) + 1
    for number, raw in _open_lines(path, report, strict):
        line = _decode(raw, path, number, report, strict)
        if line is None:
            continue
        fields = line.split("\t")
        if len(fields) < needed:
            kind = "empty line" if not line.strip() else "line without a tab"
            _problem(report, strict, path, number, kind)
            continue
        pair = _pair(fields[columns[0]], fields[columns[1]], path, number, report, strict)
        if pair:
            pair = pair[::-1] if reverse else pair
            yield (number, pair) if numbered else pair


def read_aligned(source_path, target_path, report=None, strict=False, numbered=False):
    """Yields (source, target) from two files aligned line by line
    (`(line_number, (source, target))` with `numbered`).

    Lines past the end of the shorter file are counted as "misaligned line"
    (at the longer file's line numbers), or raise in `strict` mode.

    Raises:
        FileNotFoundError: naming the missing path (checked before reading).
    """
    report = report if report is not None else ReadReport()
    for path in (source_path, target_path):
        if not os.path.isfile(os.fspath(path)):
            raise FileNotFoundError(f"No corpus file. Received: path={os.fspath(path)!r}")
    sources = _open_lines(source_path, report, strict)
    targets = _open_lines(target_path, report, strict)
    for source_line, target_line in itertools.zip_longest(sources, targets):
        if source_line is None or target_line is None:  # one file is longer
            path, other = (target_path, source_path) if source_line is None else (source_path, target_path)
            number = (target_line or source_line)[0]
            _problem(report, strict, path, number, "misaligned line", f" (no such line in {os.fspath(other)})")
            continue
        number = source_line[0]
        source = _decode(source_line[1], source_path, number, report, strict)
        target = _decode(target_line[1], target_path, number, report, strict)
        if source is None or target is None:
            continue
        pair = _pair(source, target, source_path, number, report, strict)
        if pair:
            yield (number, pair) if numbered else pair


from keras_transformer.data.wmt14 import load_wmt14, wmt14_files  # noqa: E402,F401 - TFDS corpora
