"""One decoding loop for every sampler.

`decode(model, source_ids, sampler)` encodes the sources, then extends each
sentence's hypotheses by one token a step, as the sampler chooses
(`GreedySampler`, `BeamSampler`), until every sentence is done: it reached
its length limit, or the sampler can no longer improve it. The loop runs in
segments over a growing key/value cache (`cache_lengths`), so a step costs
what the positions decoded so far need.

What becomes of the sentences that are done is a strategy the loop takes
(`narrow_batches`), which never changes an output:
- `False`: they stay in the batch to the end (static shapes);
- `True`: a sentence leaves the batch at the step it is done, so the batch
  size changes inside the loop, and the cache grows a position a step: for
  eager TensorFlow, PyTorch, and TensorFlow graphs without XLA (the
  exported SavedModel); not on JAX or under XLA, whose loops keep their
  shapes;
- `"halves"`, for static shapes (`jax.jit`, XLA): once the sentences still
  decoding fit in half of the batch they go on in a batch half as wide,
  then a quarter (`batch_widths`). Each width is another copy of the
  decoding step in a compiled function, which then compiles about twice as
  long (benchmarks/README.md: tried and dropped).

A sampler is a `keras_transformer.decoding.samplers.Sampler`, whose
interface states what the loop calls: `width` (hypotheses, and so model
rows, per sentence), `result_fields` and five methods over its hypotheses,
a `NamedTuple` of per-sentence tensors `(batch, ...)`: `start`, `tokens`,
`extend`, `done` and `result`.
"""

from typing import Any, NamedTuple

import keras
from keras import ops

from keras_transformer.compat.decoding import take, while_loop
from keras_transformer.decoding.common import (
    NEG_INF,
    cache_lengths,
    check_optional_token,
    check_source_ids,
    ensure_built,
    log_softmax,
    output_lengths,
    step_logits,
    suppressed_mask,
)
from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID

# `narrow_batches="halves"`: the narrowest batch width, in sentences, that a
# batch narrows to. Each width is another copy of the decoding step in the
# compiled function, and a step over a few sentences costs about what its
# fixed overheads do.
NARROWEST_WIDTH = 8


class LoopState(NamedTuple):
    """The decoding loop's state."""

    step: Any  # () int32: tokens decoded so far; next input at position `step`
    cache: Any  # the model's cache, leaves (batch * width, ...); {} uncached
    hypotheses: Any  # the sampler's, a NamedTuple of (batch, ...) tensors


class Rows(NamedTuple):
    """What each row of the loop's batch brings from its sentence; with
    `narrow_batches` the rows change inside the loop, and these follow them."""

    sentence: Any  # (batch,) int32: the row's sentence in the whole batch
    limit: Any  # (batch,) int32: its length limit
    source_mask: Any  # (batch, 1, 1, source_length) bool: its source's padding mask, as attention reads it
    prefix: Any = ()  # (batch, prefix_length) int32: its target prefix, PAD after; () without prefixes


def force_prefix(log_probs, prefix, step):
    """`log_probs` `(batch, width, vocab)` with every token but the target
    prefix's `NEG_INF` where a sentence's prefix `(batch, prefix_length)`
    still has a token at `step` (PAD after its end). The prefix's token
    keeps its log-probability, so an output's score counts it once, as
    `Translator.score` scores the same ids."""
    length, vocab = ops.shape(prefix)[1], log_probs.shape[-1]
    token = ops.take(prefix, ops.minimum(step, length - 1), axis=1)  # (batch,)
    forcing = ops.logical_and(ops.less(step, length), ops.not_equal(token, PAD_ID))  # (batch,)
    other = ops.not_equal(ops.arange(vocab, dtype="int32")[None, None, :], token[:, None, None])
    return ops.where(ops.logical_and(forcing[:, None, None], other), NEG_INF, log_probs)


def reorder_cache(cache, flat_indices):
    """Gathers the cache rows `flat_indices` along the batch * width axis.

    Only the self-attention part has a row a hypothesis: the rest (the
    cross-attention keys and values, a row a sentence, and the output
    projection) stays as it is.
    """
    return _map_rows(lambda x: take(x, flat_indices), cache)


def _map_rows(fn, cache, *others):
    """`cache` with `fn` mapped over its self-attention part (a row a
    hypothesis) and that of `others`; the rest as in `cache`."""
    if isinstance(cache, dict) and "self_attention" in cache:
        parts = [c["self_attention"] for c in (cache, *others)]
        return {**cache, "self_attention": keras.tree.map_structure(fn, *parts)}
    return keras.tree.map_structure(fn, cache, *others)


def _take_sentences(cache, sentences):
    """`cache` with its cross-attention part (a row a sentence) of `sentences` only."""
    if isinstance(cache, dict) and "cross_attention" in cache:
        cross = keras.tree.map_structure(lambda x: take(x, sentences), cache["cross_attention"])
        return {**cache, "cross_attention": cross}
    return cache


def _loose(x, *axes):
    """The shape of `x` with `axes` unknown (`while_loop`)."""
    return tuple(None if i in axes else d for i, d in enumerate(x.shape))


def _flat_rows(sentences, width, hypotheses=None):
    """The flat `(n * width,)` model rows of `sentences` `(n,)`: each one's
    `width` hypotheses, or those `hypotheses` `(n, width)` name."""
    within = ops.arange(width, dtype="int32") if hypotheses is None else hypotheses
    return ops.reshape(ops.expand_dims(sentences, 1) * width + within, (-1,))


def _take(hypotheses, sentences):
    return hypotheses._replace(**{f: take(getattr(hypotheses, f), sentences) for f in hypotheses._fields})


def _take_rows(rows, sentences):
    """`rows` of `sentences` `(n,)`."""
    return rows._replace(**{f: take(getattr(rows, f), sentences) for f in rows._fields
                            if not isinstance(getattr(rows, f), tuple)})


class _Decoder:
    """The step of `decode` and the strategies that run it, for one batch."""

    def __init__(self, model, sampler, memory, length, eos_id, use_cache, grows):
        self.model, self.sampler, self.memory = model, sampler, memory
        self.length, self.eos_id, self.use_cache, self.grows = length, eos_id, use_cache, grows
        self.suppressed = suppressed_mask(model)
        self.results = None  # `narrow_batches`: the whole batch's result fields

    def logits(self, tokens, state, rows):
        """Next-token log-probabilities `(rows, vocab)` float32 of `tokens`
        `(rows, length + 1)` at `state.step`, and the cache."""
        if self.use_cache:
            logits, cache = step_logits(self.model, tokens, state.step, None, rows.source_mask, state.cache,
                                        self.length, grows=self.grows)
        else:  # the source's rows repeated for each hypothesis
            mask = ops.repeat(rows.source_mask, self.sampler.width, axis=0)
            logits, cache = step_logits(self.model, tokens, state.step, self.memory, mask, None, self.length)
        return log_softmax(logits, self.suppressed), cache if self.use_cache else {}

    def extend(self, state, rows, log_probs, cache):
        """The sampler's step from `log_probs` `(batch, width, vocab)`."""
        if not isinstance(rows.prefix, tuple):
            log_probs = force_prefix(log_probs, rows.prefix, state.step)
        hypotheses, parents = self.sampler.extend(state.hypotheses, log_probs, state.step, rows.limit, self.eos_id)
        return LoopState(state.step + 1, cache, hypotheses), parents

    def first_step(self, state, rows):
        """Step 0, once a sentence: its hypotheses all start with the same
        token, so the model runs on a row a sentence, whose log-probabilities
        serve every hypothesis, and whose cache is then repeated for each."""
        width = self.sampler.width
        tokens = self.sampler.tokens(state.hypotheses)[:, 0]  # (batch, length + 1)
        log_probs, cache = self.logits(tokens, state, rows)
        state, _ = self.extend(state, rows, ops.repeat(log_probs[:, None], width, axis=1), cache)
        if width == 1:
            return state
        return state._replace(cache=_map_rows(lambda x: ops.repeat(x, width, axis=0), state.cache))

    def advance(self, state, rows):
        """One step: `(state, flat)`, the cache not yet reordered; `flat`
        `(batch * width,)` are the rows each new hypothesis extends (None:
        its own)."""
        width = self.sampler.width
        tokens = self.sampler.tokens(state.hypotheses)  # (batch, width, length + 1)
        log_probs, cache = self.logits(ops.reshape(tokens, (-1, self.length + 1)), state, rows)
        state, parents = self.extend(state, rows, ops.reshape(log_probs, (-1, width, log_probs.shape[-1])), cache)
        if parents is None:  # each hypothesis extends its own row
            return state, None
        return state, _flat_rows(ops.arange(ops.shape(parents)[0], dtype="int32"), width, parents)

    def step(self, state, rows):
        state, flat = self.advance(state, rows)
        if flat is None or not self.use_cache:
            return state
        return state._replace(cache=reorder_cache(state.cache, flat))

    def done(self, state, rows):
        """(batch,) bool: the sentences whose outputs can no longer change."""
        return self.sampler.done(state.hypotheses, state.step, rows.limit)

    def going_on(self, state, rows, end):
        return ops.logical_and(ops.less(state.step, end), ops.logical_not(ops.all(self.done(state, rows))))

    # ---------------------------------------------------------- strategies
    def keep_batch(self, state, rows, end):
        # `rows` stays out of the loop state: there, TensorFlow's XLA bridge
        # failed on the third segment's loop ("Cannot find body function
        # while_2_body_..._const_0"; tests/decoding).
        (state,) = ops.while_loop(lambda s: self.going_on(s, rows, end), lambda s: (self.step(s, rows),), (state,))
        return state, rows

    def drop_finished_rows(self, state, rows, end):
        """Runs to `end`, each sentence leaving the batch at the step it is
        done; `self.results` keeps the results of the whole batch."""

        def body(s, r, results):
            s, flat = self.advance(s, r)
            done = self.done(s, r)

            def leave():
                """The sentences done leave the batch, their results written;
                the cache's rows and sentences follow those kept."""
                keep = ops.cast(ops.nonzero(ops.logical_not(done))[0], "int32")  # (n,) sentences decoding on
                keep_flat = _flat_rows(keep, self.sampler.width)
                kept = keep_flat if flat is None else take(flat, keep_flat)
                cache = reorder_cache(_take_sentences(s.cache, keep), kept)
                return self.write_results(results, r.sentence, s), _take(s.hypotheses, keep), _take_rows(r, keep), cache

            def stay():
                cache = s.cache if flat is None else reorder_cache(s.cache, flat)
                return results, s.hypotheses, r, cache

            results, hypotheses, r, cache = ops.cond(ops.any(done), leave, stay)
            return LoopState(s.step, cache, hypotheses), r, results

        if self.results is None:
            self.results = tuple(getattr(state.hypotheses, f) for f in self.sampler.result_fields)
        # Sentences leave the batch, and a cache that grows grows.
        cache_shapes = keras.tree.map_structure(lambda x: _loose(x, 0), state.cache)
        if "self_attention" in cache_shapes:
            cache_shapes["self_attention"] = keras.tree.map_structure(lambda x: _loose(x, 0, 2),
                                                                      state.cache["self_attention"])
        shapes = (LoopState((), cache_shapes, keras.tree.map_structure(lambda x: _loose(x, 0), state.hypotheses)),
                  keras.tree.map_structure(lambda x: _loose(x, 0), rows),
                  keras.tree.map_structure(lambda x: tuple(x.shape), self.results))
        # Sentences done leave at once, so the batch goes on while it has any
        # (the first step's may stay to the second: `done` counts them).
        (state, rows, self.results) = while_loop(
            lambda s, r, w: ops.logical_and(ops.less(s.step, end), ops.greater(ops.shape(r.sentence)[0], 0)),
            body, (state, rows, self.results), shapes,
        )
        return state, rows

    def final(self, state, rows):
        """The hypotheses of the whole batch once the loop is over: with
        `narrow_batches`, the rows still there written into `self.results`."""
        if self.results is None:
            return state.hypotheses
        results = self.write_results(self.results, rows.sentence, state)
        return state.hypotheses._replace(**dict(zip(self.sampler.result_fields, results)))

    def write_results(self, results, sentences, state):
        """`results` (the whole batch's result fields) with those of
        `state`'s rows written at their `sentences`."""
        return tuple(
            ops.scatter_update(whole, sentences[:, None], getattr(state.hypotheses, field))
            for whole, field in zip(results, self.sampler.result_fields)
        )

    def narrow_batch(self, state, rows, end, widths, usable):
        """Runs to `end` in the narrowest usable width of `widths` that
        holds the sentences still decoding, narrowing as they finish."""
        last = len(widths) - 1
        batch = widths[0]

        def decoding(s, r):
            """() int32: the number of sentences still decoding."""
            return ops.sum(ops.cast(ops.logical_not(self.done(s, r)), "int32"))

        def narrower_holds(i, s, r):
            """Whether `widths[i + 1]` is usable and holds the sentences of `s` still decoding."""
            return ops.logical_and(usable[i + 1], decoding(s, r) <= widths[i + 1])

        def at_width(i):
            """A `switch` branch: decodes on in `widths[i]` sentences, those
            still decoding first, until `end`, until every sentence is done,
            or (but at the narrowest width) until the next width holds those
            still decoding."""

            def run(s):
                part, r = s, rows
                if i:
                    order = ops.where(self.done(s, rows), 0, batch) + ops.arange(batch, 0, -1, dtype="int32")
                    sentences = ops.cast(ops.top_k(order, widths[i])[1], "int32")  # (width,) decoding ones first
                    part, r = self.take_sentences(s, rows, sentences)

                def go_on(p):
                    more = self.going_on(p, r, end)
                    return more if i == last else ops.logical_and(more, ops.logical_not(narrower_holds(i, p, r)))

                (part,) = ops.while_loop(go_on, lambda p: (self.step(p, r),), (part,))
                return part if not i else self.put_sentences(s, part, sentences)

            return run

        def narrowing(s):
            index = sum(ops.cast(narrower_holds(i, s, rows), "int32") for i in range(last))
            return (ops.switch(index, [at_width(i) for i in range(len(widths))], s),)

        (state,) = ops.while_loop(lambda s: self.going_on(s, rows, end), narrowing, (state,))
        return state, rows

    def take_sentences(self, state, rows, sentences):
        """`state` and `rows` of `sentences` `(n,)` only, their cache included."""
        flat = _flat_rows(sentences, self.sampler.width)
        cache = _take_sentences(reorder_cache(state.cache, flat), sentences)
        return LoopState(state.step, cache, _take(state.hypotheses, sentences)), _take_rows(rows, sentences)

    def put_sentences(self, state, part, sentences):
        """`state` with `part`, the state of `sentences` `(n,)`, written back.
        The cache's parts but the self-attention part are left as they are:
        decoding only reads them."""
        flat = _flat_rows(sentences, self.sampler.width)[:, None]
        cache = _map_rows(lambda whole, rows: ops.scatter_update(whole, flat, rows), state.cache, part.cache)
        hypotheses = state.hypotheses._replace(**{
            f: ops.scatter_update(getattr(state.hypotheses, f), sentences[:, None], getattr(part.hypotheses, f))
            for f in state.hypotheses._fields
        })
        return LoopState(part.step, cache, hypotheses)


def batch_widths(batch):
    """The widths of `narrow_batches="halves"`, in sentences: `batch`, then
    its half and its quarter, each at least `NARROWEST_WIDTH`."""
    widths = [batch]
    while len(widths) < 3 and widths[-1] % 2 == 0 and widths[-1] // 2 >= NARROWEST_WIDTH:
        widths.append(widths[-1] // 2)
    return widths


def _narrowing(batch):
    """`(widths, usable)` of `narrow_batches="halves"`.

    With a batch size known when tracing, `batch_widths(batch)`, each usable.
    With one known only when the graph runs (a TensorFlow graph traced for
    any batch size, as the SavedModel exported with `jit_compile=True`; XLA
    compiles it for each batch size it meets): `batch`, `batch // 2` and
    `batch // 4` as tensors, the narrower two usable (bool tensors) where
    they hold at least `NARROWEST_WIDTH` sentences.
    """
    if isinstance(batch, int):
        widths = batch_widths(batch)
        return widths, [True] * len(widths)
    return [batch, batch // 2, batch // 4], [True, batch >= 2 * NARROWEST_WIDTH, batch >= 4 * NARROWEST_WIDTH]


def check_narrow_batches(narrow_batches):
    if not (isinstance(narrow_batches, bool) or narrow_batches == "halves"):
        raise ValueError(
            f'Argument `narrow_batches` must be False, True or "halves". Received: narrow_batches={narrow_batches!r}'
        )
    if narrow_batches is True and keras.backend.backend() == "jax":
        raise ValueError(
            "Argument `narrow_batches=True` needs a loop whose batch size can change: TensorFlow "
            "without XLA or PyTorch. JAX's loops keep their shapes: use \"halves\". Received: narrow_batches=True "
            "on the JAX backend"
        )


def decode(model, source_ids, sampler, max_length=None, bos_id=BOS_ID, eos_id=EOS_ID, use_cache=True,
           max_extra_length=MAX_EXTRA_LENGTH, narrow_batches=False, target_prefix=None, constraints=None):
    """Decodes a batch of sources with `sampler`; returns `sampler.result`.

    Written with `keras.ops` only (`ops.while_loop`, `ops.slice_update`,
    `ops.take`, `ops.top_k`), with static shapes inside each step but
    with `narrow_batches=True`, so it runs eagerly, under
    `tf.function(jit_compile=True)`, `jax.jit` and on PyTorch, and exports
    with stock TensorFlow ops. `beam_search` and `greedy_decode` document
    the arguments. `target_prefix`, an int array `(batch, prefix_length)`
    padded with PAD (0), holds the tokens each output starts with
    (`force_prefix`); None forces nothing. `constraints`, an int array
    `(batch, constraints, phrase_length)` padded with PAD, holds the phrases
    each output must contain (`keras_transformer.decoding.constraints`), for
    a sampler that takes them (beam search: `sampler.with_constraints()`).
    """
    check_optional_token("bos_id", bos_id)
    check_optional_token("eos_id", eos_id)
    check_narrow_batches(narrow_batches)
    if constraints is not None:
        sampler = sampler.with_constraints()  # raises for a sampler that takes none
    # Without a cache every row also holds its copy of the encoder output,
    # which would have to follow the rows; that path checks the cache, it
    # is not for speed.
    narrow_batches = narrow_batches if use_cache else False
    source_ids = check_source_ids(source_ids)
    ensure_built(model)
    # Where the batch may change size, the cache grows a position a step
    # (a model whose cache can grow, as `Transformer`'s; `extend_cache`
    # tells it); where shapes are static, it grows in segments.
    grows = use_cache and narrow_batches is True and hasattr(model, "extend_cache")
    length, limits = output_lengths(model, source_ids, max_length, max_extra_length, dynamic=narrow_batches is True)
    batch, width = ops.shape(source_ids)[0], sampler.width
    memory = model.encode(source_ids)  # (batch, source_length, d_model)
    ends = (length,) if grows else cache_lengths(model, length, use_cache)
    if use_cache:
        cache, memory = model.init_cache(memory, None if grows else ends[0]), None  # a row a sentence
    else:
        cache, memory = {}, ops.repeat(memory, width, axis=0)  # (batch * width, source_length, d_model)
    prefix = () if target_prefix is None else ops.cast(ops.convert_to_tensor(target_prefix), "int32")
    source_mask = ops.not_equal(source_ids, PAD_ID)[:, None, None, :]  # expanded once, not at every step
    rows = Rows(ops.arange(batch, dtype="int32"), limits, source_mask, prefix)
    steering = {} if constraints is None else {"constraints": ops.convert_to_tensor(constraints)}
    state = LoopState(ops.convert_to_tensor(0, dtype="int32"), cache,
                      sampler.start(source_ids, length, bos_id, limits, **steering))
    decoder = _Decoder(model, sampler, memory, length, eos_id, use_cache, grows)
    if use_cache:
        state = decoder.first_step(state, rows)
    if narrow_batches is True:
        run = decoder.drop_finished_rows
    elif narrow_batches == "halves" and len(_narrowing(batch)[0]) > 1:
        widths, usable = _narrowing(batch)
        run = lambda s, r, end: decoder.narrow_batch(s, r, end, widths, usable)  # noqa: E731
    else:
        run = decoder.keep_batch
    for i, end in enumerate(ends):  # the loop in segments, the cache extended between them
        if i:
            state = state._replace(cache=model.extend_cache(state.cache, end))
        state, rows = run(state, rows, end)
    return sampler.result(decoder.final(state, rows))
