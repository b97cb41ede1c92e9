"""Text in, text out: batching, padding and decoding around a model."""

import numbers
import warnings

import keras
import numpy as np
from keras import ops

from keras_transformer.decoding.beam_search import beam_search, check_alpha
from keras_transformer.decoding.common import model_max_length
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.greedy import greedy_decode
from keras_transformer.tokens import EOS_ID, PAD_ID, pack_source, source_capacity, unpack_output
from keras_transformer.validation import check_bool, check_non_negative_int, check_positive


def _is_token(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


class Translator:
    """Translates sentences with a trained `Transformer`.

    Sentences are sorted by length and decoded in batches of at most
    `batch_size` (padded with 0 to a multiple of `pad_to_multiple` tokens,
    and the batch to a power of two, to bound the number of compiled
    shapes); the outputs come back in the input order.

    Source handling: `translate()` encodes each string with the tokenizer
    and packs it (`tokens.pack_source`); `translate_ids()` takes model-ready ids (EOS already
    appended, no BOS) as a list of lists or a 0-padded array. An empty
    input gives an empty output without running the model. A source longer
    than the model's `max_length` is truncated to its first
    `max_length - 1` tokens followed by its last token if that is EOS (or
    to its first `max_length` tokens otherwise), with a warning; the rest
    of the batch is unaffected.

    Args:
        model: a `Transformer` (or an object with `encode`, `init_cache`,
            `decode`).
        tokenizer: optional object with pure-Python `encode(list[str]) ->
            list[list[int]]` and `decode(list[list[int]]) -> list[str]`;
            needed by `translate()` only.
        beam_size: int >= 1. 1 decodes greedily.
        alpha: float >= 0. Length penalty of beam search.
        max_extra_length: int >= 0. Each output may be up to its source
            length + `max_extra_length` tokens (capped by the model).
        batch_size: int >= 1. Sentences per decoding batch.
        jit_compile: bool. Compile decoding (XLA on TensorFlow, `jax.jit` on
            JAX; eager on PyTorch).
        pad_to_multiple: int >= 1. Source padding granularity.
        narrow_batches: bool. Compiled beam search (JAX, XLA): once at
            most half of a batch's sentences are still decoding, they go on
            in a batch half as wide, then a quarter (`beam_search(...,
            drop_finished="halves")`). Batches of 64 translated 1.1-1.5× as
            fast once compiled on 2 CPU cores, with the same outputs, but
            each batch shape compiles 2-2.5× as long: for servers and long
            jobs, not one file of a few thousand sentences
            (benchmarks/README.md). Uncompiled beam search (eager
            TensorFlow, PyTorch) drops finished sentences anyway; greedy
            decoding (`beam_size=1`) keeps its batch either way.

    Example:

    >>> translator = Translator.from_preset("tatoeba_en_fr", beam_size=4, alpha=0.6)
    >>> translator.translate(["I love you.", ""])
    ["Je t'aime.", '']
    >>> translator = Translator(model, tokenizer, beam_size=1)   # any model, greedy
    """

    def __init__(
        self,
        model,
        tokenizer=None,
        beam_size=4,
        alpha=0.6,
        max_extra_length=50,
        batch_size=32,
        jit_compile=True,
        pad_to_multiple=8,
        narrow_batches=False,
    ):
        check_positive("beam_size", beam_size)
        self.alpha = check_alpha(alpha)
        check_non_negative_int("max_extra_length", max_extra_length)
        check_positive("batch_size", batch_size)
        check_positive("pad_to_multiple", pad_to_multiple)
        check_bool("narrow_batches", narrow_batches)
        self.model = model
        self.tokenizer = tokenizer
        self.beam_size = beam_size
        self.max_extra_length = max_extra_length
        self.batch_size = batch_size
        self.pad_to_multiple = pad_to_multiple
        self.narrow_batches = narrow_batches
        self.max_length = model_max_length(model)
        config = getattr(model, "transformer_config", None)
        self.vocab_size = getattr(config, "vocab_size", None)
        if beam_size == 1:
            fn, static = greedy_decode, {}
        else:
            # Where the batch may change size (eager TensorFlow, PyTorch),
            # sentences leave it when done; where shapes are static (JAX,
            # XLA), the batch narrows only if asked, since each batch shape
            # then compiles 2-2.5× as long.
            backend = keras.backend.backend()
            static_shapes = backend == "jax" or (backend == "tensorflow" and jit_compile)
            drop_finished = ("halves" if narrow_batches else False) if static_shapes else True
            fn, static = beam_search, dict(beam_size=beam_size, alpha=self.alpha, drop_finished=drop_finished)
        static["max_extra_length"] = max_extra_length
        if jit_compile:
            self._decode = jit_decoder(model, fn, **static)
        else:
            self._decode = lambda source: fn(model, source, **static)

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A `Translator` with a preset's model and tokenizer.

        Args:
            preset: a shipped preset name (`keras_transformer.list_presets()`)
                or a directory written by `save_to_preset`.
            **kwargs: the other arguments of `Translator` (`beam_size`,
                `alpha`, `max_extra_length`, `batch_size`, ...).
        """
        from keras_transformer import presets

        return cls(presets.load_model(preset), presets.load_tokenizer(preset), **kwargs)

    def translate(self, sentences):
        """Translates a list of strings; returns a list of strings."""
        if self.tokenizer is None:
            raise ValueError("`translate()` needs a tokenizer. Received: tokenizer=None")
        if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
            raise ValueError(
                "Argument `sentences` must be a list of strings. "
                f"Received: {type(sentences).__name__}"
            )
        sentences = list(sentences)
        encoded = self.tokenizer.encode(sentences) if sentences else []
        sources = [pack_source(ids) if s.strip() and len(ids) else [] for s, ids in zip(sentences, encoded)]
        outputs = self.translate_ids(sources)
        texts = self.tokenizer.decode([ids for ids in outputs if ids]) if any(outputs) else []
        texts = iter(texts)
        return [next(texts) if ids else "" for ids in outputs]

    def translate_ids(self, source_ids):
        """Translates model-ready source ids.

        Args:
            source_ids: list of lists of ints (EOS appended, no padding
                needed), or an int array `(batch, length)` padded with 0.

        Returns:
            A list of lists of output token ids, without BOS, EOS and
            padding.
        """
        sources = self._check(source_ids)
        results = [[] for _ in sources]
        order = sorted((i for i, s in enumerate(sources) if s), key=lambda i: -len(sources[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            tokens = self._decode_batch([sources[i] for i in chunk])
            for i, row in zip(chunk, tokens):
                results[i] = unpack_output(row)
        return results

    def _check(self, source_ids):
        if isinstance(source_ids, np.ndarray) or hasattr(source_ids, "shape"):
            array = np.asarray(ops.convert_to_numpy(source_ids) if not isinstance(source_ids, np.ndarray) else source_ids)
            if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
                raise ValueError(
                    "Argument `source_ids` must be an int array (batch, length) or a list "
                    f"of lists of ints. Received: shape={array.shape}, dtype={array.dtype}"
                )
            source_ids = [[t for t in row if t != PAD_ID] for row in array.tolist()]
        if isinstance(source_ids, (str, bytes)):
            raise ValueError(f"Argument `source_ids` must be a list of lists of ints. Received: {source_ids!r}")
        sources = []
        for row in source_ids:
            if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
                raise ValueError(
                    f"Argument `source_ids` must be a list of lists of ints. Received a row: {row!r}"
                )
            row = list(row)
            for token in row:
                if not _is_token(token) or token < 0 or (self.vocab_size is not None and token >= self.vocab_size):
                    raise ValueError(
                        "Argument `source_ids` must hold integer token ids in [0, "
                        f"{self.vocab_size}). Received: {token!r}"
                    )
            sources.append(self._truncate([int(t) for t in row if t != PAD_ID]))
        return sources

    def _truncate(self, ids):
        limit = self.max_length
        if limit is None or len(ids) <= limit:
            return ids
        warnings.warn(
            f"A source of {len(ids)} tokens is longer than the model's max_length={limit}; "
            "it is truncated.",
            stacklevel=3,
        )
        if ids[-1] == EOS_ID:
            return pack_source(ids[: source_capacity(limit)])
        return ids[:limit]

    def _decode_batch(self, sources):
        width = max(len(s) for s in sources)
        width = -(-width // self.pad_to_multiple) * self.pad_to_multiple
        if self.max_length is not None:
            width = min(width, self.max_length)
        rows = 1
        while rows < len(sources):
            rows *= 2
        rows = min(rows, max(self.batch_size, len(sources)))
        batch = np.zeros((rows, width), dtype="int32")
        batch[len(sources) :, 0] = EOS_ID  # filler rows: an empty source
        for i, ids in enumerate(sources):
            batch[i, : len(ids)] = ids
        tokens, _ = self._decode(batch)
        return ops.convert_to_numpy(tokens)[: len(sources)]
