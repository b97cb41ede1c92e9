"""Training and validation data of a corpus that ships with the package.

Example:

>>> from keras_transformer.data.shipped import read_corpus
>>> train_ds, valid_ds, tokenizer = read_corpus("tatoeba_en_fr", tokens_per_batch=4096, seed=0)
>>> tokenizer.vocab_size
8000
"""

import importlib.util


def read_corpus(
    name, tokens_per_batch, seed, vocab_size=8000, max_length=128, tokenizer_path=None, corpus_file=None,
):
    """`(train, validation, tokenizer)` of a shipped corpus, batched by tokens.

    With TensorFlow installed, `train` and `validation` are `tf.data`
    datasets (`make_dataset`). Without it (a JAX or PyTorch machine), they
    are functions `pass_index -> NumPy batches` (`encoded_batches`: the same
    pairs, packing and length buckets), which
    `keras_transformer.training.train` takes.

    Args:
        name: a corpus of `keras_transformer.datasets` (e.g. "tatoeba_en_fr").
        tokens_per_batch: tokens per batch, all replicas together.
        seed: shuffles the training batches (the same order on every run,
            which resuming a run relies on) and seeds the vocabulary.
        vocab_size: subword pieces learned from the training split.
        max_length: longest sentence, in tokens, kept.
        tokenizer_path: load the shared subword vocabulary from this
            `.model` file (e.g. a resumed run's) instead of learning it.
        corpus_file: train on this full corpus file instead of the shipped
            training split (e.g. the whole `tatoeba_en_fr.tsv.gz`); the
            shipped validation and test sources are left out of it
            (`keras_transformer.datasets.full_train_pairs`).

    Returns:
        The training data (shuffled, repeating), the validation data (in
        order, once) and the `SubwordTokenizer`.

    Raises:
        ValueError: if `name` is no shipped corpus (the message lists them),
            or has no full file to read.
        OSError: if `corpus_file` cannot be read.
    """
    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer

    if corpus_file is None:
        train_pairs = datasets.load(name, "train")
    else:
        train_pairs = list(datasets.full_train_pairs(corpus_file, name))
    valid_pairs = datasets.load(name, "validation")
    if tokenizer_path:
        tokenizer = SubwordTokenizer.load(tokenizer_path)
    else:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], vocab_size, seed=seed)
    if not _has_tensorflow():
        return _numpy_data(train_pairs, valid_pairs, tokenizer, tokens_per_batch, max_length, seed)
    from keras_transformer.data import make_dataset

    train, _ = make_dataset(train_pairs, tokenizer, tokens_per_batch, max_length, seed=seed)
    valid, _ = make_dataset(valid_pairs, tokenizer, tokens_per_batch, max_length, shuffle=False)
    return train, valid, tokenizer


def _has_tensorflow():
    return importlib.util.find_spec("tensorflow") is not None


def _numpy_data(train_pairs, valid_pairs, tokenizer, tokens_per_batch, max_length, seed):
    """`read_corpus`'s result without TensorFlow: pass functions of NumPy batches.

    The pairs are encoded once. Batches have one of a few fixed shapes
    (`make_dataset`'s padded lengths, full batches), so a compiled step
    (`jax.jit`) is traced once per shape, not once per batch.
    """
    from keras_transformer.data import encode_pairs, encoded_batches

    train_ids, valid_ids = (encode_pairs(pairs, tokenizer, max_length)[:2] for pairs in (train_pairs, valid_pairs))

    def train(index):  # pass `index`, shuffled anew with (seed, index)
        return encoded_batches(*train_ids, tokens_per_batch, max_length, seed=[seed, index], fixed_shapes=True)

    def valid(index):
        return encoded_batches(*valid_ids, tokens_per_batch, max_length, shuffle=False, fixed_shapes=True)

    return train, valid, tokenizer
