"""What `train` trains on: a shipped corpus or your own files, batched by tokens.

Your own parallel data is one TSV file (`source<TAB>target` lines) or two
plain-text files aligned line by line (source and target, as OpenNMT and
fairseq take them), plain or `.gz`. They are read strictly: the first bad
line (no tab, an empty side, invalid UTF-8, files of different lengths)
stops the run with its file and line, unless `skip_bad_lines` skips and
counts them (`keras_transformer.data.corpora`).

Example:

>>> from keras_transformer.training.training_data import read_corpus, read_files, training_data
>>> train_ds, valid_ds, tokenizer = read_corpus("tatoeba_en_fr", tokens_per_batch=4096, seed=0)
>>> tokenizer.vocab_size
8000
>>> pairs = read_files(["train.en", "train.fr"])              # [(source, target), ...]
>>> train_ds, valid_ds, tokenizer = training_data(pairs, read_files(["valid.tsv"]), 4096, seed=0)
"""

import importlib.util
import os

from keras_transformer import datasets
from keras_transformer.data import SubwordTokenizer, encode_pairs, encoded_batches, make_dataset
from keras_transformer.data.corpora import ReadReport, read_aligned, read_tsv
from keras_transformer.data.lengths import MAX_LENGTH

# Where `train` learns a vocabulary: the default size (small corpora; the
# paper's WMT vocabularies are 32-37k).
VOCAB_SIZE = 8000


def read_corpus(
    name, tokens_per_batch, seed, vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH, tokenizer=None, corpus_file=None,
):
    """`(train, validation, tokenizer)` of a shipped corpus, batched by tokens.

    Args:
        name: a corpus of `keras_transformer.datasets` (e.g. "tatoeba_en_fr").
        tokens_per_batch, seed, vocab_size, max_length, tokenizer: as
            `training_data`.
        corpus_file: train on this full corpus file instead of the shipped
            training split (e.g. the whole `tatoeba_en_fr.tsv.gz`); the
            shipped validation and test sources are left out of it
            (`keras_transformer.datasets.full_train_pairs`).

    Raises:
        ValueError: if `name` is no shipped corpus (the message lists them),
            or has no full file to read.
        OSError: if `corpus_file` cannot be read.
    """
    train_pairs, valid_pairs = corpus_pairs(name, corpus_file)
    return training_data(train_pairs, valid_pairs, tokens_per_batch, seed, vocab_size, max_length, tokenizer)


def corpus_pairs(name, corpus_file=None):
    """`(training pairs, validation pairs)` of a shipped corpus, as `read_corpus` reads them."""
    if corpus_file is None:
        train_pairs = datasets.load(name, "train")
    else:
        train_pairs = list(datasets.full_train_pairs(corpus_file, name))
    return train_pairs, datasets.load(name, "validation")


def read_files(paths, skip_bad_lines=False, log=print, numbered=False):
    """The `(source, target)` pairs of your own parallel data.

    Args:
        paths: `[tsv_file]` or `[source_file, target_file]`.
        skip_bad_lines: skip bad lines and log how many of each kind, with
            the first few files and lines, instead of raising at the first.
        log: callable for that count.
        numbered: `(line_number, (source, target))` items instead, each
            with its line in the file(s).

    Raises:
        FileNotFoundError: naming a missing file.
        ValueError: `"file:line: kind"` for the first bad line (without
            `skip_bad_lines`), or when the files hold no pair.
    """
    paths = [os.fspath(p) for p in paths]
    if len(paths) not in (1, 2):
        raise ValueError(f"Expected one TSV file or a source and a target file. Received: {paths}")
    report = ReadReport()
    reader = read_tsv if len(paths) == 1 else read_aligned
    try:
        pairs = list(reader(*paths, report=report, strict=not skip_bad_lines, numbered=numbered))
    except ValueError as error:
        raise ValueError(f"{error}. Fix the line, or skip such lines with --skip-bad-lines.") from None
    if report.total_skipped and log:
        log(f"{' + '.join(paths)}: {report}")
    if not pairs:
        raise ValueError(f"No sentence pair in {' + '.join(paths)}. Received: {report}")
    return pairs


def training_data(train_pairs, valid_pairs, tokens_per_batch, seed, vocab_size=VOCAB_SIZE, max_length=MAX_LENGTH,
                  tokenizer=None):
    """`(train, validation, tokenizer)`: pairs batched by tokens for `train()`.

    With TensorFlow installed, `train` and `validation` are `tf.data`
    datasets (`make_dataset`). Without it (a JAX or PyTorch machine), they
    are functions `pass_index -> NumPy batches` (`encoded_batches`: the same
    pairs, packing and length buckets), which
    `keras_transformer.training.train` takes.

    Args:
        train_pairs: a list of `(source, target)` strings.
        valid_pairs: the same, or None (no validation).
        tokens_per_batch: tokens per batch, all replicas together.
        seed: shuffles the training batches (the same order on every run,
            which resuming a run relies on) and seeds the vocabulary.
        vocab_size: subword pieces learned from the training pairs, with
            byte fallback (`SubwordTokenizer.train`).
        max_length: longest sentence, in tokens, kept.
        tokenizer: a `SubwordTokenizer` to use instead of learning one
            (a resumed run's, or a preset's for fine-tuning).

    Returns:
        The training data (shuffled, repeating), the validation data (in
        order, once; None without `valid_pairs`) and the `SubwordTokenizer`.
    """
    if tokenizer is None:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], vocab_size, seed=seed)
    if not _has_tensorflow():
        return _numpy_data(train_pairs, valid_pairs, tokenizer, tokens_per_batch, max_length, seed)
    train, _ = make_dataset(train_pairs, tokenizer, tokens_per_batch, max_length, seed=seed)
    valid = None
    if valid_pairs is not None:
        valid, _ = make_dataset(valid_pairs, tokenizer, tokens_per_batch, max_length, shuffle=False)
    return train, valid, tokenizer


def _has_tensorflow():
    return importlib.util.find_spec("tensorflow") is not None


def _numpy_data(train_pairs, valid_pairs, tokenizer, tokens_per_batch, max_length, seed):
    """`training_data`'s result without TensorFlow: pass functions of NumPy batches.

    The pairs are encoded once. Batches have one of a few fixed shapes
    (`make_dataset`'s padded lengths, full batches), so a compiled step
    (`jax.jit`) is traced once per shape, not once per batch.
    """
    train_ids = encode_pairs(train_pairs, tokenizer, max_length)[:2]

    def train(index):  # pass `index`, shuffled anew with (seed, index)
        return encoded_batches(*train_ids, tokens_per_batch, max_length, seed=[seed, index], fixed_shapes=True)

    if valid_pairs is None:
        return train, None, tokenizer
    valid_ids = encode_pairs(valid_pairs, tokenizer, max_length)[:2]

    def valid(index):
        return encoded_batches(*valid_ids, tokens_per_batch, max_length, shuffle=False, fixed_shapes=True)

    return train, valid, tokenizer
