"""The decode runner: how a `Translator`'s pieces are decoded on the current backend.

The `Translator` hands it packed source pieces, a sampler and each piece's
steering; the runner sorts them into padded batches (the preprocessor's
padding rule), chooses the way to decode them, keeps the decoders it made,
and returns each piece's outputs in order. The SavedModel export builds its
graph from the same `graph_decoder`.

The way to decode, by backend and `jit_compile`:
- `"auto"` on TensorFlow: the SavedModel's own decoding, one graph without
  XLA, each sentence leaving the batch when done; eagerly instead while the
  runner's `eager_steps` last (below).
- `"auto"` or True on JAX: `jax.jit`; True on TensorFlow: XLA; each batch
  shape compiles once.
- False, or PyTorch: eager.

Example:

>>> runner = DecodeRunner(model, preprocessor, max_extra_length=50, batch_size=64)
>>> runner.decode([[5, 6, 3], [7, 3]], BeamSampler(4, 0.6))
[([[9, 8, 3]], [-0.41]), ([[10, 3]], [-0.12])]
"""

import collections
import functools
from typing import NamedTuple

import keras
import numpy as np
from keras import ops

from keras_transformer.decoding.common import is_finished
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.defaults import ALIGNMENT_LAYER
from keras_transformer.decoding.scoring import force_decode
from keras_transformer.tokens import EOS_ID, PAD_ID
from keras_transformer.translation.alignment import word_links
from keras_transformer.translation.preprocessor import padded_rows, power_of_two, power_of_two_graph, round_up
from keras_transformer.validation import check_bool, check_non_negative_int

# `jit_compile="auto"` on TensorFlow decodes eagerly until a call would take
# the runner past this many decoding steps in all (each batch counted as its
# padded source length, about its output's); that call traces the graph, and
# every later one runs it. Tracing and optimizing the beam search takes about
# as long as this many eager steps of a full batch (benchmarks/README.md, "The
# `Translator`'s first sentence on TensorFlow"), so no caller pays much more
# than twice what the better choice would have cost: a few sentences never
# pay for tracing, and a file, translated by the command line in calls of
# one batch, stops paying for eager steps after a few calls.
EAGER_STEPS = 64

# Decoders kept at once, the least recently used dropped first: each sampler
# configuration (a sampling seed, a temperature, an n-best) traces or
# compiles its own, and a long-running process must not keep them all.
DECODER_CACHE_SIZE = 8


class Steering(NamedTuple):
    """What steers one piece's translation: the target prefix's ids and
    each constraint phrase's ids."""

    prefix: list
    constraints: list


def sampler_key(sampler):
    """A sampler's configuration, as the decoder cache's key: its class and
    `get_config()`."""
    return type(sampler).__name__, tuple(sorted(sampler.get_config().items()))


class DecodeRunner:
    """Decodes pieces with a sampler: backend, eager or graph, and the decoders' cache.

    Args:
        model: a `Transformer` (or an object with `encode`, `init_cache`
            and `decode`).
        preprocessor: the `TranslationPreprocessor` whose padding rule
            batches the pieces.
        max_extra_length: int >= 0. Output tokens beyond a source's length.
        batch_size: int >= 1. Pieces decoded together.
        jit_compile: `"auto"`, True or False (module docstring).
        narrow_batches: bool. Compiled decoding narrows a batch as its
            sentences finish (`narrow_batches="halves"` of
            `keras_transformer.decoding.loop`).
        eager_steps: int >= 0. With `"auto"` on TensorFlow, the decoding
            steps taken eagerly before the graph is traced (`EAGER_STEPS`);
            0: the graph from the first call. What is left of them is
            `eager_steps_left`, which a caller may read and set.
        cache_size: int >= 1. Decoders kept at once (`DECODER_CACHE_SIZE`).
    """

    def __init__(self, model, preprocessor, max_extra_length, batch_size, jit_compile="auto",
                 narrow_batches=False, eager_steps=EAGER_STEPS, cache_size=DECODER_CACHE_SIZE):
        if jit_compile != "auto":
            check_bool("jit_compile", jit_compile)
        check_bool("narrow_batches", narrow_batches)
        check_non_negative_int("eager_steps", eager_steps)
        self.model, self.preprocessor = model, preprocessor
        self.max_extra_length, self.batch_size = max_extra_length, batch_size
        self.jit_compile, self.narrow_batches, self.cache_size = jit_compile, narrow_batches, cache_size
        self.backend = keras.backend.backend()
        self.eager_start = jit_compile == "auto" and self.backend == "tensorflow"
        self.eager_steps_left = eager_steps if self.eager_start else 0
        self.static_shapes = self.compiles_each_shape(jit_compile)
        self.decoders = collections.OrderedDict()  # (sampler_key, jit_compile) -> decode, least recent first

    def compiles_each_shape(self, jit_compile):
        """Whether batches keep their shapes (and rows go up to a power of
        two), as where each shape compiles: JAX's loops always, XLA."""
        return self.backend == "jax" or (self.backend == "tensorflow" and jit_compile is True)

    def narrowing(self, static_shapes):
        """The sampler's `narrow_batches` for a loop with or without static
        shapes: where the batch may change size, sentences leave it when
        done; where shapes are static, it narrows only if asked, since each
        batch shape then compiles about twice as long."""
        if not static_shapes:
            return True
        return "halves" if self.narrow_batches else False

    def search(self, sampler, static_shapes):
        """`search(model, source, prefix=None, constraints=None)`: `sampler`'s decoding of a padded batch."""
        narrow_batches = self.narrowing(static_shapes)

        def search(model, source, prefix=None, constraints=None):
            return sampler(model, source, self.max_extra_length, narrow_batches, prefix, constraints)

        return search

    def decoder(self, sampler, jit_compile=None):
        """`decode(source, prefix=None, constraints=None) -> (tokens,
        scores)` of `sampler` for a padded batch, made once while it stays
        among the `cache_size` most recently used."""
        jit_compile = self.jit_compile if jit_compile is None else jit_compile
        key = (sampler_key(sampler), jit_compile)
        if key in self.decoders:
            self.decoders.move_to_end(key)
        else:
            self.decoders[key] = self._make_decoder(sampler, jit_compile)
            while len(self.decoders) > self.cache_size:
                self.decoders.popitem(last=False)
        return self.decoders[key]

    def _make_decoder(self, sampler, jit_compile):
        if jit_compile == "auto" and self.backend == "tensorflow":
            return self._graph_decoder(sampler)
        search = self.search(sampler, self.compiles_each_shape(jit_compile))
        if jit_compile:
            return jit_decoder(self.model, search)
        return functools.partial(search, self.model)

    def _graph_decoder(self, sampler):
        """TensorFlow: the SavedModel's decoding (`graph_decoder`) in one
        graph without XLA, traced once for any number of rows and any width
        (its output buffer is the model's `max_length`; each sentence still
        stops at its own limit, so the outputs are those of a graph per
        width). Tracing is most of what translating a file once costs, and a
        graph per width, or a second loop, traced more than it gained
        (benchmarks/README.md: tried and dropped).
        """
        import tensorflow as tf  # only on the TensorFlow backend

        search = functools.partial(self.search(sampler, static_shapes=False), self.model)
        decode = graph_decoder(search, False, 1, sampler.get_config().get("num_return", 1))
        traced = {}  # the steering arguments given -> a graph traced for them, when first needed

        def run(source, prefix=None, constraints=None):
            given = _given(prefix, constraints)
            names = tuple(given)
            if names not in traced:
                specs = [tf.TensorSpec([None] * (3 if name == "constraints" else 2), tf.int32) for name in names]
                traced[names] = tf.function(lambda source, *steering: decode(source, **dict(zip(names, steering))),
                                            input_signature=[tf.TensorSpec([None, None], tf.int32), *specs],
                                            autograph=False)
            return traced[names](source, *given.values())

        return run

    def _call_decoder(self, sampler, batches):
        """The decoder of a call of `batches`: eager while the call's steps
        fit in `eager_steps_left` (spending them), else this runner's own,
        and no eager step after."""
        steps = sum(width for _, width in batches)
        if self.eager_start and steps <= self.eager_steps_left:
            self.eager_steps_left -= steps
            return self.decoder(sampler, False)
        self.eager_steps_left = 0  # the graph from now on
        return self.decoder(sampler)

    def decode(self, pieces, sampler, steering=None):
        """`(outputs, scores)` of each packed source in `pieces`, decoded
        with `sampler` in the batches of the preprocessor's padding rule,
        each steered by its `Steering` in `steering` (None: none): the output
        ids as decoded (EOS last where they end) and their scores, best
        first, without the placeholders of hypotheses the search never
        finished."""
        results = [None] * len(pieces)
        batches = self.preprocessor.batches([len(piece) for piece in pieces], self.batch_size, self.static_shapes)
        decode = self._call_decoder(sampler, batches)
        for chunk, width in batches:
            chunk_steering = None if steering is None else [steering[i] for i in chunk]
            for i, result in zip(chunk, self._decode_batch(decode, [pieces[i] for i in chunk], width, chunk_steering)):
                results[i] = result
        return results

    def _decode_batch(self, decode, sources, width, steering=None):
        rows = padded_rows(len(sources), self.batch_size) if self.static_shapes else len(sources)
        batch = np.zeros((rows, width), dtype="int32")
        batch[len(sources) :, 0] = EOS_ID  # filler rows: an empty source
        for i, ids in enumerate(sources):
            batch[i, : len(ids)] = ids
        tokens, scores = decode(batch, **steering_arrays(steering or [], rows))
        tokens, scores = ops.convert_to_numpy(tokens)[: len(sources)], ops.convert_to_numpy(scores)[: len(sources)]
        if tokens.ndim == 2:  # one hypothesis a sentence: (rows, length) -> (rows, 1, length)
            tokens, scores = tokens[:, None], scores[:, None]
        return [
            ([as_decoded(ids) for ids, score in zip(hypotheses, row_scores) if is_finished(score)],
             [float(score) for score in row_scores if is_finished(score)])
            for hypotheses, row_scores in zip(tokens, scores)
        ]

    def force(self, sources, targets, kinds=None):
        """`force_decode` of packed `sources` and `targets` in padded
        batches: each target's log-probabilities; given the tokenizer's
        piece `kinds`, also each pair's `(links, source words, starts inside
        a word, target words)` (`keras_transformer.translation.alignment.word_links`)."""
        links = kinds is not None
        log_probs, found = [None] * len(sources), [None] * len(sources)
        order = sorted(range(len(sources)), key=lambda i: (len(sources[i]), len(targets[i])))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            source, target = padded([sources[i] for i in chunk]), padded([targets[i] for i in chunk])
            out = force_decode(self.model, source, target, ALIGNMENT_LAYER if links else None)
            probs = ops.convert_to_numpy(out[0] if links else out)
            if links:
                words = [ops.convert_to_numpy(x) for x in word_links(out[1], source, target, kinds)]
            for row, i in enumerate(chunk):
                log_probs[i] = [float(p) for p in probs[row, : len(targets[i])]]
                if links:
                    pairs = [(int(s), t) for t, s in enumerate(words[0][row]) if s >= 0]
                    found[i] = (pairs, int(words[1][row]), bool(words[2][row]), int(words[3][row]))
        return (log_probs, found) if links else log_probs

    def links(self, pieces, outputs, kinds):
        """Each piece's word links to its output (None where it has none),
        as `force` finds them with the tokenizer's piece `kinds`."""
        rows = [i for i, ids in enumerate(outputs) if ids is not None]
        links = [None] * len(pieces)
        _, found = self.force([pieces[i] for i in rows], [outputs[i] for i in rows], kinds)
        for i, piece_links in zip(rows, found):
            links[i] = piece_links
        return links


def as_decoded(row):
    """A decoded row's ids up to its first EOS, EOS included, without the padding after."""
    row = [int(t) for t in row]
    if EOS_ID in row:
        return row[: row.index(EOS_ID) + 1]
    while row and row[-1] == PAD_ID:
        row.pop()
    return row


def padded(rows):
    """`rows` of ids as an int32 batch `(rows, longest)`, PAD after each."""
    batch = np.zeros((len(rows), max(1, max(map(len, rows)))), dtype="int32")
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch


def steering_arrays(steering, rows):
    """The decoder's steering arguments of a batch's `steering` (one
    `Steering` per sentence; `rows` at least that many): `prefix` `(rows,
    prefix_length)` and `constraints` `(rows, constraints, phrase_length)`,
    PAD after each, for those any sentence uses. Their lengths are rounded
    up as sources are (`round_up`; a power of two of phrases), so compiled
    decoders meet few shapes."""
    arrays = {}
    longest = max([len(s.prefix) for s in steering], default=0)
    if longest:
        arrays["prefix"] = np.zeros((rows, round_up(longest)), dtype="int32")
        for i, s in enumerate(steering):
            arrays["prefix"][i, : len(s.prefix)] = s.prefix
    count = max([len(s.constraints) for s in steering], default=0)
    if count:
        length = max(len(ids) for s in steering for ids in s.constraints)
        arrays["constraints"] = np.zeros((rows, power_of_two(count), round_up(length)), dtype="int32")
        for i, s in enumerate(steering):
            for j, ids in enumerate(s.constraints):
                arrays["constraints"][i, j, : len(ids)] = ids
    return arrays


def graph_decoder(search, jit_compile, parallel_loops, num_return=1):
    """`decode(source, prefix=None, constraints=None) -> (ids, scores)`:
    `search(source, prefix, constraints)` over a bucket's padded sources
    `(rows, width)`, each output starting with its target prefix `(rows,
    prefix_length)` and holding its constraints `(rows, constraints,
    phrase_length)` (`decoding.loop.decode`), in a TensorFlow graph traced
    for any number of rows: compiled with XLA (rows filled up to a power of
    two), or in `parallel_loops` loops whose sentences leave the batch as
    they finish; `num_return` hypotheses a sentence."""
    import tensorflow as tf  # the graph is TensorFlow's

    if jit_compile:
        compiled = tf.function(search, jit_compile=True, autograph=False)

        def search_bucket(source, prefix=None, constraints=None):
            return _rows_to_a_power_of_two(compiled, source, **_given(prefix, constraints))
    else:
        def search_bucket(source, prefix=None, constraints=None):
            return _parallel_search(search, source, parallel_loops, num_return, **_given(prefix, constraints))
    return search_bucket


def _given(prefix, constraints):
    """The steering arguments a decoder was given, by name (None: not given)."""
    return {name: x for name, x in (("prefix", prefix), ("constraints", constraints)) if x is not None}


def _parallel_search(search, source, parallel_loops, num_return, **steering):
    """`search` over `parallel_loops` parts of the rows, each its own loop.

    The parts do not depend on one another, so TensorFlow's inter-op
    threads run their loops side by side, where one loop's small ops, each
    waiting on the last, leave a second core mostly idle. Each loop is a
    copy of the beam search in the graph: a nested `tf.function` would keep
    one, but it ran single sentences slower (benchmarks/README.md: tried and
    dropped). A part may be empty (fewer rows than parts): its
    loop is skipped, so one sentence runs one loop's ops, not two.
    """
    import tensorflow as tf  # the graph is TensorFlow's

    per_row = [num_return] if num_return > 1 else []  # (rows, [n,] length) ids, (rows, [n]) scores

    def part_search(part, part_steering):
        def run():
            ids, scores = search(part, **part_steering)
            return tf.cast(ids, tf.int32), tf.cast(scores, tf.float32)

        empty = lambda: (tf.zeros([0, *per_row, 1], tf.int32), tf.zeros([0, *per_row], tf.float32))  # noqa: E731
        return tf.cond(tf.shape(part)[0] > 0, run, empty)

    rows = tf.shape(source)[0]
    bounds = [rows * i // parallel_loops for i in range(parallel_loops + 1)]
    parts = [part_search(source[start:end], {name: x[start:end] for name, x in steering.items()})
             for start, end in zip(bounds, bounds[1:])]
    length = tf.reduce_max([tf.shape(ids)[-1] for ids, _ in parts])
    # Parts stop at their own lengths: PAD the shorter ones' ids.
    ids = [
        tf.pad(ids, [[0, 0]] * (ids.shape.rank - 1) + [[0, length - tf.shape(ids)[-1]]], constant_values=PAD_ID)
        for ids, _ in parts
    ]
    return tf.concat(ids, 0), tf.concat([scores for _, scores in parts], 0)


def _rows_to_a_power_of_two(search, source, **steering):
    """`search` with the rows of `source` (and of its `steering`) filled up
    to a power of two with copies of its last row (they stop with it): XLA
    compiles once per shape."""
    import tensorflow as tf  # the graph is TensorFlow's

    rows = tf.shape(source)[0]
    filled = tf.minimum(tf.range(power_of_two_graph(rows)), rows - 1)
    ids, scores = search(tf.gather(source, filled), **{name: tf.gather(x, filled) for name, x in steering.items()})
    return ids[:rows], scores[:rows]
