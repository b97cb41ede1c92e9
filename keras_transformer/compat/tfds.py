"""WMT14 through TensorFlow Datasets: where it reaches past TFDS' public API.

`tfds_retries(count)` and `tfds_checksum_file_names(name)`: TensorFlow
Datasets has no public setting for its downloader's HTTP retries
(`downloader.MAX_RETRIES`), which an offline machine would spend minutes
on, nor a public reader of the checksums file it ships for each dataset,
which names the archives to place in `manual_dir` (no upstream issue
filed).
"""

import contextlib
import os


@contextlib.contextmanager
def tfds_retries(count):
    """Sets TensorFlow Datasets' HTTP retry count for a while (`None`: leave it)."""
    from tensorflow_datasets.core.download import downloader  # an optional dependency, for WMT14 only

    previous = getattr(downloader, "MAX_RETRIES", None)
    if count is not None and previous is not None:
        downloader.MAX_RETRIES = count
    try:
        yield
    finally:
        if previous is not None:
            downloader.MAX_RETRIES = previous


def tfds_checksum_file_names(name):
    """url -> file name, from the checksums TensorFlow Datasets ships for dataset `name`."""
    import tensorflow_datasets as tfds  # an optional dependency, for WMT14 only

    path = os.path.join(os.path.dirname(tfds.__file__), "url_checksums", f"{name}.txt")
    names = {}
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if len(fields) == 4:
                    names[fields[0]] = fields[3]
    return names
