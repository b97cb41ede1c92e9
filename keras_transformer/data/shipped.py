"""Training and validation datasets of a corpus that ships with the package.

Example:

>>> from keras_transformer.data.shipped import read_corpus
>>> train_ds, valid_ds, tokenizer = read_corpus("tatoeba_en_fr", tokens_per_batch=4096, seed=0)
>>> tokenizer.vocab_size
8000
"""


def read_corpus(name, tokens_per_batch, seed, vocab_size=8000, max_length=128, tokenizer_path=None):
    """`(train_ds, valid_ds, tokenizer)` of a shipped corpus, via the data pipeline.

    Args:
        name: a corpus of `keras_transformer.datasets` (e.g. "tatoeba_en_fr").
        tokens_per_batch: tokens per batch, all replicas together.
        seed: shuffles the training batches (the same order on every run,
            which resuming a run relies on) and seeds the vocabulary.
        vocab_size: subword pieces learned from the training split.
        max_length: longest sentence, in tokens, kept.
        tokenizer_path: load the shared subword vocabulary from this
            `.model` file (e.g. a resumed run's) instead of learning it.

    Returns:
        The training `tf.data.Dataset` (shuffled, repeating), the validation
        one (in order, once) and the `SubwordTokenizer`.

    Raises:
        ValueError: if `name` is no shipped corpus (the message lists them).
    """
    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer, make_dataset

    train_pairs = datasets.load(name, "train")
    valid_pairs = datasets.load(name, "validation")
    if tokenizer_path:
        tokenizer = SubwordTokenizer.load(tokenizer_path)
    else:
        tokenizer = SubwordTokenizer.train([s for pair in train_pairs for s in pair], vocab_size, seed=seed)
    train, _ = make_dataset(train_pairs, tokenizer, tokens_per_batch, max_length, seed=seed)
    valid, _ = make_dataset(valid_pairs, tokenizer, tokens_per_batch, max_length, shuffle=False)
    return train, valid, tokenizer
