"""WMT14 English-German and English-French through TensorFlow Datasets.

`load_wmt14` reads TFDS' `wmt14_translate` (the paper's training data and
newstest2014) as (source, target) string pairs, either direction. TFDS
downloads several GB from statmt.org on first use; on a machine without
internet access it raises a `RuntimeError` that lists the archives to copy
into `manual_dir` (TFDS picks files up there by name), instead of retrying
downloads for minutes.

Example:

>>> pairs = load_wmt14("de-en", source="en", split="test")    # newstest2014, En->De
>>> next(iter(pairs))
('Gutach: Increased safety for pedestrians', 'Gutach: Noch mehr Sicherheit für Fußgänger')
>>> dataset = load_wmt14("fr-en", source="en", as_dataset=True)  # tf.data of (en, fr) strings
"""

import os
import socket

from keras_transformer.compat.tfds import tfds_checksum_file_names, tfds_retries

WMT14_PAIRS = ("de-en", "fr-en")
SPLITS = ("train", "validation", "test")


def wmt14_files(pair="de-en"):
    """The archives TFDS downloads for `wmt14_translate/<pair>`.

    Returns:
        A list of `(file_name, url)`: put each `file_name` in `manual_dir`.
    """
    import tensorflow_datasets as tfds
    from tensorflow_datasets.translate import wmt

    _check_pair(pair)
    builder = tfds.builder(f"wmt14_translate/{pair}", data_dir=os.devnull)
    language = builder.builder_config.language_pair[0]
    names = tfds_checksum_file_names("wmt14_translate")
    files = []
    for subsets in builder.subsets.values():
        for subset in subsets:
            dataset = wmt.DATASET_MAP[subset]
            for name in dataset.get_manual_dl_files(language):
                files.append((name, dataset.get_url(language)))
            if not dataset.get_manual_dl_files(language):
                for url in dataset.get_url(language):
                    files.append((names.get(url, url.rsplit("/", 1)[-1]), url))
    return list(dict.fromkeys(files))


def load_wmt14(pair="de-en", source="en", split="train", data_dir=None, manual_dir=None, as_dataset=False):
    """(source, target) string pairs of TFDS `wmt14_translate`.

    Args:
        pair: `"de-en"` or `"fr-en"`.
        source: the source language, either side of `pair` (`"en"` for the
            paper's En->De and En->Fr).
        split: `"train"`, `"validation"` (newstest2013) or `"test"`
            (newstest2014).
        data_dir: TFDS data folder (default `~/tensorflow_datasets`).
        manual_dir: folder holding archives downloaded by hand (see
            `wmt14_files`); passed to `download_and_prepare`.
        as_dataset: return a `tf.data.Dataset` of `(source, target)`
            `tf.string` scalars (streams; for `make_dataset`) instead of a
            Python iterator of `str` pairs.

    Raises:
        ValueError: an unknown pair, source or split.
        RuntimeError: TFDS could not download or prepare the data; the
            message lists the files to place in `manual_dir`.
    """
    import tensorflow_datasets as tfds

    _check_pair(pair)
    languages = pair.split("-")
    if source not in languages:
        raise ValueError(f"Argument `source` must be one of {languages}. Received: source={source!r}")
    if split not in SPLITS:
        raise ValueError(f"Argument `split` must be one of {SPLITS}. Received: split={split!r}")
    target = languages[1 - languages.index(source)]
    name = f"wmt14_translate/{pair}"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        config = tfds.download.DownloadConfig(manual_dir=manual_dir)
        offline = not _is_prepared(builder) and not _online()
        with tfds_retries(0 if offline else None):  # offline: fail at once, not after minutes
            builder.download_and_prepare(download_config=config)
        dataset = builder.as_dataset(split=split)
    except Exception as error:  # noqa: BLE001 - any failure here means: data not there
        raise RuntimeError(_offline_message(name, pair, error, data_dir, manual_dir)) from error
    if as_dataset:
        return dataset.map(lambda example: (example[source], example[target]))
    return ((example[source].decode("utf-8"), example[target].decode("utf-8")) for example in tfds.as_numpy(dataset))


def _check_pair(pair):
    if pair not in WMT14_PAIRS:
        raise ValueError(f"Argument `pair` must be one of {WMT14_PAIRS}. Received: pair={pair!r}")


def _is_prepared(builder):
    try:
        return builder.is_prepared()
    except Exception:  # noqa: BLE001 - an unreadable data_dir is "not prepared"
        return False


def _online(host="www.statmt.org", timeout=3.0):
    """Whether the WMT host resolves (fast on offline machines: no retries)."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(timeout)
    try:
        socket.getaddrinfo(host, 80)
        return True
    except OSError:
        return False
    finally:
        socket.setdefaulttimeout(previous)


def _offline_message(name, pair, error, data_dir, manual_dir):
    try:
        files = wmt14_files(pair)
    except Exception:  # noqa: BLE001
        files = []
    listing = "\n".join(f"  {file_name}   <- {url}" for file_name, url in files) or "  (see tensorflow_datasets/translate/wmt.py)"
    manual = manual_dir or os.path.join(data_dir or "~/tensorflow_datasets", "downloads", "manual")
    return (
        f"Could not prepare TensorFlow Datasets {name!r} ({type(error).__name__}: {error}).\n"
        f"Without internet access, download these archives on another machine and place them, "
        f"with these exact file names, in manual_dir={manual!r}, then pass manual_dir=... again:\n"
        f"{listing}\n"
        f"(or prepare the dataset where there is network and copy its data_dir={data_dir or '~/tensorflow_datasets'!r}). "
        "To train offline right now, use the shipped corpus: keras_transformer.datasets.load('tatoeba_en_fr')."
    )
