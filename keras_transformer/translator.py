"""The translation task: a model, its preprocessor and a sampler, text in and text out."""

import numbers

import keras
import numpy as np
from keras import ops

from keras_transformer import presets, saved_model
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.decoding.common import model_max_length
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.defaults import ALPHA, BATCH_SIZE, BEAM_SIZE, MAX_EXTRA_LENGTH
from keras_transformer.decoding.samplers import get_sampler
from keras_transformer.preprocessor import DEFAULT_BUCKETS, TranslationPreprocessor, padded_rows
from keras_transformer.tokens import EOS_ID, PAD_ID, pack_source, unpack_output
from keras_transformer.validation import check_bool, check_positive


# The Translator's decoding options, which the export and the command line pass on.
DECODING_OPTIONS = ("beam_size", "alpha", "max_extra_length", "narrow_batches", "long_inputs", "buckets")

# `jit_compile="auto"` on TensorFlow decodes eagerly until a call would take
# the translator past this many decoding steps in all (each batch counted
# as its padded source length, about its output's, once per `BATCH_SIZE`
# rows or part of it); that call traces the graph, and every later one runs
# it. Tracing and optimizing the beam search takes about as long as this
# many eager steps of `BATCH_SIZE` rows (benchmarks/README.md): a few
# sentences never pay for it, a file pays it once. Counting a wide batch
# once per `BATCH_SIZE` rows overstates its eager cost (a wide step costs
# more than a narrow one, far less than in proportion to its rows), which
# sends such files, which repay the graph anyway, to it at once.
EAGER_STEPS = 256


def _is_token(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


class Translator:
    """Translates sentences with a trained `Transformer`.

    It holds the model, a `TranslationPreprocessor` (the rules for blank,
    long and padded inputs, stated in `keras_transformer.preprocessor`)
    and a sampler (greedy decoding for `beam_size=1`, else beam search).
    `translate()` and the SavedModel that `export()` writes run the same
    rules and the same sampler, so they give the same translations.

    Sentences become pieces by the preprocessor's rules, sorted by length
    and decoded in batches of at most `batch_size`, padded by its padding
    rule (to their bucket, or for compiled shapes to a multiple of 8 of a
    batch's longest); the outputs come back in the input order.

    Args:
        model: a `Transformer` (or an object with `encode`, `init_cache`,
            `decode` and a `transformer_config.max_length`).
        tokenizer: a `SubwordTokenizer`; needed by `translate()` and
            `export()`, not by `translate_ids()`.
        beam_size: int >= 1. 1 decodes greedily.
        alpha: float >= 0. Length penalty of beam search.
        max_extra_length: int >= 0. Each output may be up to its source
            length + `max_extra_length` tokens (capped by the model).
        batch_size: int >= 1. Sentences per decoding batch.
        jit_compile: `"auto"`, True or False. `"auto"`: the fastest way to
            translate lists of sentences on each backend: on TensorFlow the
            SavedModel's own decoding (one graph without XLA, each sentence
            leaving the batch when done), decoding eagerly instead until a
            call takes the translator past `EAGER_STEPS` (256) decoding
            steps of up to 64 rows in all, since so few do not repay
            tracing the graph;
            `jax.jit` on JAX, eager on PyTorch. True: XLA on TensorFlow
            (faster per sentence once compiled, but each batch shape
            compiles for seconds), `jax.jit` on JAX. False: eager.
        narrow_batches: bool. Compiled decoding (JAX, XLA): once at most
            half of a batch's sentences are still decoding, they go on in a
            batch half as wide, then a quarter (`drop_finished="halves"`,
            `keras_transformer.decoding.loop`). Faster once compiled, but
            each batch shape compiles about twice as long: for servers and
            long jobs (benchmarks/README.md). Uncompiled decoding (eager
            TensorFlow, PyTorch, the plain SavedModel graph) drops each
            finished sentence anyway.
        long_inputs: `"split"` (an input over the model's source budget is
            split at sentence ends, or into windows) or `"truncate"`.
        buckets: the source lengths batches are padded to.

    Example:

    >>> translator = Translator.from_preset("tatoeba_en_fr", beam_size=4, alpha=0.6)
    >>> translator.translate(["I love you.", ""])
    ["Je t'aime.", '']
    >>> translator.export("saved_models/tatoeba_en_fr")   # the same translations, as a SavedModel
    """

    def __init__(
        self,
        model,
        tokenizer=None,
        beam_size=BEAM_SIZE,
        alpha=ALPHA,
        max_extra_length=MAX_EXTRA_LENGTH,
        batch_size=BATCH_SIZE,
        jit_compile="auto",
        narrow_batches=False,
        long_inputs="split",
        buckets=DEFAULT_BUCKETS,
    ):
        check_positive("batch_size", batch_size)
        if jit_compile != "auto":
            check_bool("jit_compile", jit_compile)
        check_bool("narrow_batches", narrow_batches)
        max_length = model_max_length(model)
        if max_length is None:
            raise ValueError("Argument `model` must have a `max_length` (its `transformer_config`).")
        self.model = model
        self.tokenizer = tokenizer
        self.sampler = get_sampler(beam_size, alpha)
        self.preprocessor = TranslationPreprocessor(tokenizer, max_length, max_extra_length, long_inputs, buckets)
        self.max_extra_length = max_extra_length
        self.batch_size = batch_size
        self.narrow_batches = narrow_batches
        self.vocab_size = getattr(getattr(model, "transformer_config", None), "vocab_size", None)
        self._static_shapes, self._decode = self._decoder(jit_compile)
        # On TensorFlow with "auto": eager decoding, and the steps it may still take.
        self._eager, self._eager_steps = None, 0
        if jit_compile == "auto" and keras.backend.backend() == "tensorflow":
            self._eager, self._eager_steps = self._decoder(False)[1], EAGER_STEPS

    def _decoder(self, jit_compile):
        """`(static_shapes, decode)`: whether batches keep their shapes,
        and `decode(source_ids) -> (tokens, scores)` for a padded batch."""
        backend = keras.backend.backend()
        if jit_compile == "auto" and backend == "tensorflow":
            return False, self._graph_decoder()
        # Where the batch may change size (eager TensorFlow, PyTorch),
        # sentences leave it when done; where shapes are static (JAX's loops
        # always, XLA), the batch narrows only if asked, since each batch
        # shape then compiles about twice as long.
        static_shapes = backend == "jax" or (backend == "tensorflow" and jit_compile is True)
        drop_finished = self.drop_finished(static_shapes)
        if jit_compile:
            decode = jit_decoder(self.model, self.sampler, max_extra_length=self.max_extra_length,
                                 drop_finished=drop_finished)
        else:
            decode = lambda source: self.sampler(self.model, source, self.max_extra_length, drop_finished)  # noqa: E731
        return static_shapes, decode

    def _graph_decoder(self):
        """TensorFlow: the SavedModel's decoding (`saved_model.graph_decoder`)
        in one graph without XLA, traced once for any number of rows and any
        width (its output buffer is the model's `max_length`; each sentence
        still stops at its own limit, so the outputs are those of a graph per
        width). Tracing is most of what translating a file once costs, and a
        graph per width, or a second loop, traced more than it gained
        (benchmarks/README.md).
        """
        import tensorflow as tf

        decode = saved_model.graph_decoder(self, False, parallel_loops=1)
        return tf.function(decode, input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)

    @property
    def beam_size(self):
        return self.sampler.get_config()["beam_size"]

    def drop_finished(self, static_shapes):
        """The sampler's `drop_finished` for a loop with or without static shapes."""
        if not static_shapes:
            return True
        return "halves" if self.narrow_batches else False

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A `Translator` with a preset's model and tokenizer.

        Args:
            preset: a shipped preset name (`keras_transformer.list_presets()`)
                or a directory written by `save_to_preset`.
            **kwargs: the other arguments of `Translator` (`beam_size`,
                `alpha`, `max_extra_length`, `batch_size`, ...).
        """
        return cls(presets.load_model(preset), SubwordTokenizer.from_preset(preset), **kwargs)

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
        pieces, owners = self.preprocessor.pieces(sentences)
        outputs = self._decode_pieces(pieces)
        translations = self.tokenizer.decode(outputs) if outputs else []
        return self.preprocessor.join(translations, owners, len(sentences))

    def translate_ids(self, source_ids):
        """Translates model-ready source ids.

        A source over the model's source budget is cut into windows (or
        truncated, with `long_inputs="truncate"`), each ending in EOS, and
        the windows' outputs are concatenated.

        Args:
            source_ids: list of lists of ints (EOS appended, no padding
                needed), or an int array `(batch, length)` padded with 0.

        Returns:
            A list of lists of output token ids, without BOS, EOS and
            padding.
        """
        sources = self._check(source_ids)
        pieces, owners = [], []
        for index, ids in enumerate(sources):
            if len(ids) > self.preprocessor.source_budget:
                windows = [pack_source(w) for w in self.preprocessor.windows(ids[:-1] if ids[-1] == EOS_ID else ids)]
            else:
                windows = [ids] if ids else []
            pieces += windows
            owners += [index] * len(windows)
        results = [[] for _ in sources]
        for owner, output in zip(owners, self._decode_pieces(pieces)):
            results[owner] += output
        return results

    def export(self, export_dir, **options):
        """Writes a SavedModel that translates strings as `translate()` does.

        The decoding options are this translator's; `options` are those of
        the graph (`keras_transformer.saved_model.write_saved_model`:
        `version`, `n_best`, `jit_compile`, `parallel_loops`,
        `warmup_batch_sizes`, `metadata`). Returns the version folder's path.
        """
        return saved_model.write_saved_model(self, export_dir, **options)

    def _check(self, source_ids):
        if isinstance(source_ids, np.ndarray) or hasattr(source_ids, "shape"):
            array = np.asarray(ops.convert_to_numpy(source_ids) if not isinstance(source_ids, np.ndarray) else source_ids)
            if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
                raise ValueError(
                    "Argument `source_ids` must be an int array (batch, length) or a list "
                    f"of lists of ints. Received: shape={array.shape}, dtype={array.dtype}"
                )
            source_ids = array.tolist()
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
            sources.append([int(t) for t in row if t != PAD_ID])
        return sources

    def _decode_pieces(self, pieces):
        """The output ids of each packed source in `pieces`, in the batches
        of the preprocessor's padding rule."""
        results = [None] * len(pieces)
        lengths = [len(piece) for piece in pieces]
        batches = self.preprocessor.batches(lengths, self.batch_size, self._static_shapes)
        decode, steps = self._decode, sum(width * -(-len(rows) // BATCH_SIZE) for rows, width in batches)
        if self._eager is not None and steps <= self._eager_steps:
            decode, self._eager_steps = self._eager, self._eager_steps - steps
        else:
            self._eager_steps = 0  # the graph from now on
        for chunk, width in batches:
            for i, row in zip(chunk, self._decode_batch(decode, [pieces[i] for i in chunk], width)):
                results[i] = unpack_output(row)
        return results

    def _decode_batch(self, decode, sources, width):
        # Static shapes compile once per shape: rows go up to a power of two.
        rows = padded_rows(len(sources), self.batch_size) if self._static_shapes else len(sources)
        batch = np.zeros((rows, width), dtype="int32")
        batch[len(sources) :, 0] = EOS_ID  # filler rows: an empty source
        for i, ids in enumerate(sources):
            batch[i, : len(ids)] = ids
        tokens, _ = decode(batch)
        return ops.convert_to_numpy(tokens)[: len(sources)]
