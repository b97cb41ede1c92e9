"""A real tiny Transformer that learned to copy short English sentences, with
a real SentencePiece vocabulary learned by `SubwordTokenizer.train`.

The `Translator` tests use it to check text in, text out against decoding
done by hand, on every backend: unlike the hand-built models of
`toy_models`, its outputs come from trained weights and its pieces from a
SentencePiece model ("▁" for spaces, "the" in two pieces).
"""

import contextlib

import keras
import numpy as np

from keras_transformer import LabelSmoothedCrossEntropy, Transformer, paper_optimizer
from keras_transformer.data import SubwordTokenizer
from keras_transformer.tokens import pack_source, pack_target, split_target

WORDS = "the a big small red old cat dog bird fish sees likes chases eats".split()


def sentences(count, seed):
    """`count` distinct sentences of 2 to 5 words of `WORDS`."""
    rng = np.random.default_rng(seed)
    out = {}
    while len(out) < count:
        words = rng.choice(WORDS, int(rng.integers(2, 6))).tolist()
        out.setdefault(" ".join(words), None)
    return list(out)


def padded(rows):
    width = max(map(len, rows))
    return np.array([row + [0] * (width - len(row)) for row in rows], "int32")


@contextlib.contextmanager
def one_torch_thread():
    """On PyTorch, one intra-op thread: for matrices this small more threads
    only wait for each other, and on 2 busy CPU cores they made the training
    below many times slower."""
    if keras.backend.backend() != "torch":
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_copy_model(train_sentences, vocab_size=64, epochs=50, seed=0, targets=None, batch_size=32):
    """`(model, tokenizer)`: a one-layer Transformer trained to copy
    `train_sentences` (or to translate them into `targets`).

    For 256 sentences: 400 steps. It then copies nearly all of its training
    sentences and most unseen ones on TensorFlow, JAX and PyTorch (each
    initializes the weights its own way); after 30 epochs TensorFlow's copied
    far fewer. A vocabulary of 64 pieces holds most words whole and splits
    "the" into "▁t" "he".
    """
    tokenizer = SubwordTokenizer.train(train_sentences, vocab_size=vocab_size, seed=seed, num_threads=1,
                                       byte_fallback=False)  # 64 pieces: no room for 256 byte pieces
    ids = tokenizer.encode(train_sentences)
    source = padded([pack_source(x) for x in ids])
    target_ids = ids if targets is None else tokenizer.encode(targets)
    target_in, labels = split_target(padded([pack_target(x) for x in target_ids]))
    keras.utils.set_random_seed(seed)
    model = Transformer(
        vocab_size=tokenizer.vocab_size, num_layers=1, d_model=32, num_heads=2, d_ff=64, max_length=32,
        dropout_rate=0.0,
    )
    model.compile(paper_optimizer(32, warmup_steps=50), LabelSmoothedCrossEntropy())
    with one_torch_thread():
        model.fit((source, target_in), labels, batch_size=batch_size, epochs=epochs, verbose=0)
    return model, tokenizer
