"""The translation task: a model, its preprocessor and a sampler, text in and text out."""

import numbers
from typing import NamedTuple, Optional

import keras
import numpy as np
from keras import ops

from keras_transformer import presets, saved_model
from keras_transformer.alignment import pharaoh, piece_kinds, word_links
from keras_transformer.data.tokenizer import SubwordTokenizer
from keras_transformer.decoding.beam_search import length_penalty
from keras_transformer.decoding.common import NEG_INF, model_max_length, output_limit
from keras_transformer.decoding.compile import jit_decoder
from keras_transformer.decoding.defaults import ALIGNMENT_LAYER, ALPHA, BATCH_SIZE, BEAM_SIZE, MAX_EXTRA_LENGTH
from keras_transformer.decoding.samplers import BeamSampler, RandomSampler, get_sampler
from keras_transformer.decoding.scoring import force_decode, scoring_limits
from keras_transformer.preprocessor import DEFAULT_BUCKETS, TranslationPreprocessor, padded_rows
from keras_transformer.tokens import EOS_ID, PAD_ID, pack_source, unpack_output
from keras_transformer.validation import check_bool, check_phrases, check_positive


# The Translator's decoding options, which the export and the command line pass on.
DECODING_OPTIONS = ("beam_size", "alpha", "max_extra_length", "narrow_batches", "long_inputs", "buckets")

# `jit_compile="auto"` on TensorFlow decodes eagerly until a call would take
# the translator past this many decoding steps in all (each batch counted
# as its padded source length, about its output's, once per `BATCH_SIZE`
# rows or part of it); that call traces the graph, and every later one runs
# it. Tracing and optimizing the beam search takes about as long as this
# many eager steps of `BATCH_SIZE` rows (benchmarks/README.md, "The
# `Translator`'s first sentence on TensorFlow"), so no caller pays much more
# than twice what the better choice would have cost: a few sentences never
# pay for tracing, and a file, translated by the command line in calls of
# `BATCH_SIZE` sentences, stops paying for eager steps after a few calls.
# Counting a wide batch once per `BATCH_SIZE` rows overstates its eager cost
# (a wide step costs more than a narrow one, far less than in proportion to
# its rows), which sends such files, which repay the graph anyway, to it at
# once.
EAGER_STEPS = 64



class Steering(NamedTuple):
    """What steers one piece's translation: the target prefix's ids and
    each constraint phrase's ids."""

    prefix: list
    constraints: list


class Hypothesis(NamedTuple):
    """One translation of a sentence (`Translator.hypotheses`)."""

    text: str
    score: float  # its log-probability over the length penalty: what the search ranks by
    confidence: float  # the mean log-probability of its tokens, EOS included
    alignment: Optional[str] = None  # Pharaoh-format word links, on request


def prediction(hypotheses, n_best=1, alignments=False):
    """A sentence's `hypotheses` as one row of outputs, named as the
    SavedModel's and the REST API's: `translations`, `scores` and
    `confidences` of the best; its `alignments` if asked; with `n_best > 1`
    the lists `nbest_translations`, `nbest_scores`, `nbest_confidences`
    (and `nbest_alignments`), best first."""
    best = hypotheses[0]
    row = {"translations": best.text, "scores": best.score, "confidences": best.confidence}
    if alignments:
        row["alignments"] = best.alignment
    if n_best > 1:
        row.update(nbest_translations=[h.text for h in hypotheses], nbest_scores=[h.score for h in hypotheses],
                   nbest_confidences=[h.confidence for h in hypotheses])
        if alignments:
            row["nbest_alignments"] = [h.alignment for h in hypotheses]
    return row


class TokenScores(NamedTuple):
    """A given translation's scores (`Translator.score`)."""

    tokens: list  # its pieces (ids from `score_ids`), EOS last
    log_probs: list  # each token's log-probability
    total: float  # their sum
    score: float  # the sum over the length penalty, as the search scores

    def prediction(self):
        """As one row of outputs, named as the REST API's."""
        return {"scores": self.score, "totals": self.total, "tokens": list(self.tokens),
                "token_log_probs": list(self.log_probs)}


def _is_token(value):
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


class Translator:
    """Translates sentences with a trained `Transformer`.

    It holds the model, a `TranslationPreprocessor` (the rules for blank,
    long and padded inputs, stated in `keras_transformer.preprocessor`)
    and a sampler (greedy decoding for `beam_size=1`, else beam search).
    `hypotheses()` returns the n best with their scores, confidences and
    word alignments, `score()` scores given translations, and a call may
    sample instead (docs/decoding.md).
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
            call takes the translator past `EAGER_STEPS` decoding
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
            long jobs (benchmarks/README.md: tried and dropped). Uncompiled
            decoding (eager TensorFlow, PyTorch, the plain SavedModel graph)
            drops each finished sentence anyway.
        long_inputs: `"split"` (an input over the model's source budget is
            split at sentence ends, or into windows) or `"truncate"`.
        buckets: the source lengths batches are padded to.

    Example:

    >>> translator = Translator.from_preset("tatoeba_en_fr", beam_size=4, alpha=0.6)
    >>> translator.translate(["I love you.", ""])
    ["Je t'aime.", '']
    >>> translator.hypotheses(["I love you."], n_best=2, alignments=True)[0][1]
    Hypothesis(text='Je vous aime.', score=-1.426..., confidence=-0.387..., alignment='0-0 2-1 1-2')
    >>> translator.score(["I love you."], ["Je t'aime."])[0].score
    -0.692...
    >>> translator.translate(["I love you."], sampler=RandomSampler(top_p=0.9, seed=1))
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
        # Terminology constraints are met as whole words of a subword
        # tokenizer's (a word tokenizer's tokens are whole words).
        continues_word = getattr(tokenizer, "continues_word", None)
        self.continues_word = None if continues_word is None else continues_word()
        self.sampler = get_sampler(beam_size, alpha, continues_word=self.continues_word)
        self.alpha = self.sampler.alpha
        self.preprocessor = TranslationPreprocessor(tokenizer, max_length, max_extra_length, long_inputs, buckets)
        self.max_extra_length = max_extra_length
        self.batch_size = batch_size
        self.narrow_batches = narrow_batches
        self.vocab_size = getattr(getattr(model, "transformer_config", None), "vocab_size", None)
        self.jit_compile = jit_compile
        self._piece_kinds = None  # what each piece is to a text's words, for alignments
        self._penalties = {}  # output length -> its length penalty
        self._decoders = {}  # repr(sampler) -> decode(source_ids) -> (tokens, scores)
        self._static_shapes = self._decoder(self.sampler)[0]
        # On TensorFlow with "auto": the decoding steps it may still take eagerly.
        self._eager_steps = EAGER_STEPS if self._eager_start else 0

    @property
    def _eager_start(self):
        return self.jit_compile == "auto" and keras.backend.backend() == "tensorflow"

    def _decoder(self, sampler, jit_compile=None):
        """`(static_shapes, decode)` for `sampler`, made once: whether
        batches keep their shapes, and `decode(source_ids) -> (tokens,
        scores)` for a padded batch."""
        jit_compile = self.jit_compile if jit_compile is None else jit_compile
        key = (repr(sampler), jit_compile)
        if key not in self._decoders:
            self._decoders[key] = self._make_decoder(sampler, jit_compile)
        return self._decoders[key]

    def _make_decoder(self, sampler, jit_compile):
        backend = keras.backend.backend()
        if jit_compile == "auto" and backend == "tensorflow":
            return False, self._graph_decoder(sampler)
        # Where the batch may change size (eager TensorFlow, PyTorch),
        # sentences leave it when done; where shapes are static (JAX's loops
        # always, XLA), the batch narrows only if asked, since each batch
        # shape then compiles about twice as long.
        static_shapes = backend == "jax" or (backend == "tensorflow" and jit_compile is True)
        drop_finished = self.drop_finished(static_shapes)

        def search(model, source, prefix=None, constraints=None):
            return sampler(model, source, self.max_extra_length, drop_finished, prefix, constraints)

        if jit_compile:
            decode = jit_decoder(self.model, search)
        else:
            decode = lambda source, prefix=None, constraints=None: search(  # noqa: E731
                self.model, source, prefix, constraints)
        return static_shapes, decode

    def _graph_decoder(self, sampler):
        """TensorFlow: the SavedModel's decoding (`saved_model.graph_decoder`)
        in one graph without XLA, traced once for any number of rows and any
        width (its output buffer is the model's `max_length`; each sentence
        still stops at its own limit, so the outputs are those of a graph per
        width). Tracing is most of what translating a file once costs, and a
        graph per width, or a second loop, traced more than it gained
        (benchmarks/README.md: tried and dropped).
        """
        import tensorflow as tf

        decode = saved_model.graph_decoder(self, False, parallel_loops=1, sampler=sampler)
        traced = {}  # the steering arguments given -> a graph traced for them, when first needed

        def run(source, prefix=None, constraints=None):
            given = {name: value for name, value in (("prefix", prefix), ("constraints", constraints))
                     if value is not None}
            names = tuple(given)
            if names not in traced:
                specs = [tf.TensorSpec([None] * (3 if name == "constraints" else 2), tf.int32) for name in names]
                traced[names] = tf.function(lambda source, *steering: decode(source, **dict(zip(names, steering))),
                                            input_signature=[tf.TensorSpec([None, None], tf.int32), *specs],
                                            autograph=False)
            return traced[names](source, *given.values())

        return run

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

    @classmethod
    def from_saved_model(cls, path, **kwargs):
        """The `Translator` an exported SavedModel was traced from.

        Its weights, tokenizer and decoding settings are read from the
        SavedModel folder `path` (`saved_model.read_translator_parts`)
        without loading its graph, which is what a one-shot command needs:
        loading every bucket's beam search is most of what the graph
        would cost one sentence. It translates as the SavedModel's
        `serving_default` does.

        Args:
            path: a model folder (its latest version) or one version folder.
            **kwargs: the `Translator`'s options that are not decoding
                settings (`batch_size`, `jit_compile`).
        """
        given = sorted(set(kwargs) & set(DECODING_OPTIONS))
        if given:
            raise ValueError(f"A SavedModel decodes as it was exported: {', '.join(given)} cannot change. "
                             f"Received: {', '.join(f'{name}={kwargs[name]!r}' for name in given)}")
        model, tokenizer, settings = saved_model.read_translator_parts(path)
        decoding = {name: settings[name] for name in DECODING_OPTIONS if name in settings}
        return cls(model, tokenizer, **decoding, **kwargs)

    def translate(self, sentences, sampler=None, target_prefix=None, constraints=None):
        """Translates a list of strings; returns a list of strings.

        `sampler`: None, this translator's search, or a `RandomSampler`
        to sample each translation (`keras_transformer.decoding.sampling`).
        `target_prefix`: None, or a list of strings, one per sentence
        (`""` for none): each translation starts with its prefix's tokens
        and the model continues it (`decoding.loop.force_prefix`).
        `constraints`: None, or a list of lists of strings, one list per
        sentence (`[]` for none): terminology that each translation must
        contain, by lexically constrained beam search
        (`keras_transformer.decoding.constraints`). A sentence's prefix and
        constraints steer the first piece of a long input.
        """
        pieces, owners = self._pieces(sentences)
        sampler = self._sampler(1, sampler)
        steering = self._steering(target_prefix, constraints, pieces, owners, len(sentences), sampler)
        outputs = [texts[0] for texts, _ in self._decode_pieces(pieces, sampler, steering)]
        translations = self.tokenizer.decode(outputs) if outputs else []
        return self.preprocessor.join(translations, owners, len(sentences))

    def hypotheses(self, sentences, n_best=1, sampler=None, alignments=False, target_prefix=None, constraints=None):
        """The `n_best` best translations of each sentence, with their scores.

        Args:
            sentences: a list of strings.
            n_best: int in [1, beam_size]: hypotheses per sentence, best
                first, from beam search (fewer where the search finished
                fewer).
            sampler: None, or a `RandomSampler` (then `n_best` is 1).
            alignments: bool. Also align each hypothesis's words to its
                sentence's (`keras_transformer.alignment`).
            target_prefix: None, or a list of strings, one per sentence
                (`""` for none), that the hypotheses start with (`translate`).
            constraints: None, or a list of lists of strings, one per
                sentence, that every hypothesis contains (`translate`).

        Returns:
            A list of lists of `Hypothesis`: `text`, `score` (the
            log-probability over the length penalty, by which the search
            ranks), `confidence` (the mean log-probability of its tokens,
            EOS included; its `exp` is their geometric-mean probability)
            and `alignment` (Pharaoh format, or None). A blank sentence has
            one empty hypothesis scored 0. An input split into pieces (the
            preprocessor's long-input rule) joins its pieces' texts, takes
            the mean of their scores, pools their tokens' log-probabilities
            and offsets their words.
        """
        pieces, owners = self._pieces(sentences)
        sampler = self._sampler(n_best, sampler)
        steering = self._steering(target_prefix, constraints, pieces, owners, len(sentences), sampler)
        results = self._decode_pieces(pieces, sampler, steering)
        members = [[] for _ in sentences]  # each sentence's pieces
        for piece, owner in enumerate(owners):
            members[owner].append(piece)
        hypotheses = [[] for _ in sentences]
        for rank in range(max([len(outputs) for outputs, _ in results], default=0)):
            outputs = [texts[rank] if rank < len(texts) else None for texts, _ in results]
            links = self._alignments(pieces, outputs) if alignments else None
            for index, hypothesis in enumerate(self._join_rank(members, results, rank, links)):
                if hypothesis is not None:
                    hypotheses[index].append(hypothesis)
        blank = Hypothesis("", 0.0, 0.0, "" if alignments else None)
        return [found or [blank] for found in hypotheses]

    def score(self, sources, targets):
        """Scores given translations: `targets[i]` as a translation of `sources[i]`.

        Each side is tokenized whole and packed (EOS appended), as in
        training; a side over the model's `max_length` raises
        `ValueError`. Returns a list of `TokenScores`: the target's pieces
        (EOS last), each one's log-probability, their sum (`total`), and
        the sum over the length penalty (`score`), as the search scores
        its own outputs.
        """
        for name, texts in (("sources", sources), ("targets", targets)):
            _check_strings(name, texts)
        if len(sources) != len(targets):
            raise ValueError(
                "Arguments `sources` and `targets` must have the same length. "
                f"Received: {len(sources)} sources, {len(targets)} targets"
            )
        self._need_tokenizer("score")
        source_ids = [pack_source(ids) for ids in self.tokenizer.encode(list(sources))]
        target_ids = [[*ids, EOS_ID] for ids in self.tokenizer.encode(list(targets))]
        results = self.score_ids(source_ids, target_ids)
        return [r._replace(tokens=self.tokenizer.id_to_piece(r.tokens)) for r in results]

    def score_ids(self, source_ids, target_ids):
        """`score` of model-ready ids: packed sources, and targets as the
        search outputs them (EOS last where they end). Returns a list of
        `TokenScores` whose `tokens` are the target ids."""
        sources, targets = self._check(source_ids, "source_ids"), self._check(target_ids, "target_ids")
        if len(sources) != len(targets):
            raise ValueError(
                "Arguments `source_ids` and `target_ids` must have the same length. "
                f"Received: {len(sources)} and {len(targets)} rows"
            )
        for name, rows, most in zip(("source_ids", "target_ids"), (sources, targets),
                                    scoring_limits(self.preprocessor.max_length)):
            for index, row in enumerate(rows):
                if len(row) > most:
                    raise ValueError(
                        f"Argument `{name}` row {index} has {len(row)} tokens; the model scores at most {most}. "
                        f"Received: {len(row)} tokens"
                    )
        log_probs = self._forced(sources, targets)
        return [
            TokenScores(target, probs, sum(probs), sum(probs) / self._penalty(len(target)))
            for target, probs in zip(targets, log_probs)
        ]

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
        sources = self._check(source_ids, "source_ids")
        pieces, owners = [], []
        for index, ids in enumerate(sources):
            if len(ids) > self.preprocessor.source_budget:
                windows = [pack_source(w) for w in self.preprocessor.windows(ids[:-1] if ids[-1] == EOS_ID else ids)]
            else:
                windows = [ids] if ids else []
            pieces += windows
            owners += [index] * len(windows)
        results = [[] for _ in sources]
        for owner, (outputs, _) in zip(owners, self._decode_pieces(pieces, self.sampler)):
            results[owner] += unpack_output(outputs[0])
        return results

    def export(self, export_dir, **options):
        """Writes a SavedModel that translates strings as `translate()` does.

        The decoding options are this translator's; `options` are those of
        the graph (`keras_transformer.saved_model.write_saved_model`:
        `version`, `n_best`, `jit_compile`, `parallel_loops`,
        `warmup_batch_sizes`, `metadata`). Returns the version folder's path.
        """
        return saved_model.write_saved_model(self, export_dir, **options)


    # ------------------------------------------------------------ internals
    def _need_tokenizer(self, method):
        if self.tokenizer is None:
            raise ValueError(f"`{method}()` needs a tokenizer. Received: tokenizer=None")

    def _pieces(self, sentences):
        """The preprocessor's pieces of `sentences` and their owners."""
        self._need_tokenizer("translate")
        _check_strings("sentences", sentences)
        return self.preprocessor.pieces(list(sentences))

    def _steering(self, target_prefix, constraints, pieces, owners, count, sampler):
        """Each piece's `Steering` (a sentence's goes to its first piece),
        or None when nothing steers the call."""
        prefixes = self._per_sentence("target_prefix", target_prefix, count, _check_strings)
        phrases = self._per_sentence("constraints", constraints, count, _check_phrases)
        if phrases and any(phrases) and not getattr(sampler, "takes_constraints", False):
            raise ValueError("Argument `constraints` needs beam search: a translator with beam_size >= 2, and no "
                             f"sampling. Received: beam_size={self.beam_size}, sampler={sampler!r}")
        prefix_ids = self.tokenizer.encode(list(prefixes)) if prefixes is not None else [[]] * count
        phrase_ids = [self.tokenizer.encode(list(p)) if p else [] for p in phrases] if phrases else [[]] * count
        steering, seen = [], set()
        for piece, owner in zip(pieces, owners):
            first = owner not in seen
            seen.add(owner)
            steer = Steering(prefix_ids[owner], phrase_ids[owner]) if first else Steering([], [])
            limit = output_limit(len(piece), self.max_extra_length, self.preprocessor.max_length)
            forced = len(steer.prefix) + sum(map(len, steer.constraints))
            if forced >= limit:
                name = "target_prefix" if not steer.constraints else "constraints"
                raise ValueError(
                    f"Argument `{name}` of sentence {owner} forces {forced} tokens (prefix and constraints); its "
                    f"translation may have at most {limit}, so they must be shorter. Received: "
                    f"target_prefix={None if prefixes is None else prefixes[owner]!r}, "
                    f"constraints={None if phrases is None else phrases[owner]!r}"
                )
            steering.append(steer)
        return steering if any(s.prefix or s.constraints for s in steering) else None

    @staticmethod
    def _per_sentence(name, values, count, check):
        """`values` (one per sentence) checked, or None."""
        if values is None:
            return None
        check(name, values)
        if len(values) != count:
            raise ValueError(f"Argument `{name}` must hold one entry per sentence. Received: "
                             f"{len(values)} entries for {count} sentences")
        return list(values)

    def _sampler(self, n_best, sampler):
        """The sampler of a call: this translator's, its search with
        `n_best` hypotheses, or `sampler`."""
        check_positive("n_best", n_best)
        if sampler is not None:
            if not isinstance(sampler, RandomSampler):
                raise ValueError(f"Argument `sampler` must be a `RandomSampler` or None. Received: {sampler!r}")
            if n_best != 1:
                raise ValueError(
                    f"Sampling returns one translation a sentence: `n_best` must be 1. Received: n_best={n_best}"
                )
            return sampler
        if n_best == 1:
            return self.sampler
        if n_best > self.beam_size:
            raise ValueError(
                f"Argument `n_best` must be at most `beam_size`={self.beam_size}. Received: n_best={n_best}")
        return BeamSampler(self.beam_size, self.alpha, num_return=n_best, continues_word=self.continues_word)

    def _penalty(self, length):
        """The length penalty of an output of `length` tokens (one backend
        call per length, not per hypothesis)."""
        if length not in self._penalties:
            self._penalties[length] = float(ops.convert_to_numpy(length_penalty(length, self.alpha)))
        return self._penalties[length]

    def _join_rank(self, members, results, rank, links):
        """Each sentence's hypothesis of `rank` (None where a piece has
        none), from the outputs and `links` of its pieces, `members`."""
        joined = []
        for group in members:
            if not group or any(rank >= len(results[p][0]) for p in group):
                joined.append(None)
                continue
            outputs = [results[p][0][rank] for p in group]
            scores = [results[p][1][rank] for p in group]
            texts = self.tokenizer.decode(outputs)
            log_prob = sum(score * self._penalty(len(ids)) for score, ids in zip(scores, outputs))
            tokens = sum(len(ids) for ids in outputs)
            alignment = None if links is None else pharaoh(_offset_links([links[p] for p in group]))
            joined.append(Hypothesis(" ".join(t for t in texts if t), float(np.mean(scores)),
                                     log_prob / tokens if tokens else 0.0, alignment))
        return joined

    def _alignments(self, pieces, outputs):
        """Each piece's word links to its output (None where it has none),
        in the form `_offset_links` takes."""
        rows = [i for i, ids in enumerate(outputs) if ids is not None]
        links = [None] * len(pieces)
        for i, found in zip(rows, self._forced([pieces[i] for i in rows], [outputs[i] for i in rows], True)[1]):
            links[i] = found
        return links

    def _forced(self, sources, targets, links=False):
        """`force_decode` of packed `sources` and `targets` in padded
        batches: each target's log-probabilities; with `links`, also each
        pair's `(links, source words, starts inside a word, target words)`
        (`keras_transformer.alignment.word_links`)."""
        log_probs, found = [None] * len(sources), [None] * len(sources)
        order = sorted(range(len(sources)), key=lambda i: (len(sources[i]), len(targets[i])))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            source, target = _padded([sources[i] for i in chunk]), _padded([targets[i] for i in chunk])
            out = force_decode(self.model, source, target, ALIGNMENT_LAYER if links else None)
            probs = ops.convert_to_numpy(out[0] if links else out)
            if links:
                if self._piece_kinds is None:
                    self._piece_kinds = piece_kinds(self.tokenizer)
                words = [ops.convert_to_numpy(x) for x in word_links(out[1], source, target, self._piece_kinds)]
            for row, i in enumerate(chunk):
                log_probs[i] = [float(p) for p in probs[row, : len(targets[i])]]
                if links:
                    pairs = [(int(s), t) for t, s in enumerate(words[0][row]) if s >= 0]
                    found[i] = (pairs, int(words[1][row]), bool(words[2][row]), int(words[3][row]))
        return (log_probs, found) if links else log_probs

    def _check(self, source_ids, name):
        if isinstance(source_ids, np.ndarray) or hasattr(source_ids, "shape"):
            array = source_ids if isinstance(source_ids, np.ndarray) else np.asarray(ops.convert_to_numpy(source_ids))
            if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
                raise ValueError(
                    f"Argument `{name}` must be an int array (batch, length) or a list "
                    f"of lists of ints. Received: shape={array.shape}, dtype={array.dtype}"
                )
            source_ids = array.tolist()
        if isinstance(source_ids, (str, bytes)):
            raise ValueError(f"Argument `{name}` must be a list of lists of ints. Received: {source_ids!r}")
        rows = []
        for row in source_ids:
            if isinstance(row, (str, bytes)) or not hasattr(row, "__iter__"):
                raise ValueError(f"Argument `{name}` must be a list of lists of ints. Received a row: {row!r}")
            row = list(row)
            for token in row:
                if not _is_token(token) or token < 0 or (self.vocab_size is not None and token >= self.vocab_size):
                    raise ValueError(
                        f"Argument `{name}` must hold integer token ids in [0, {self.vocab_size}). Received: {token!r}"
                    )
            rows.append([int(t) for t in row if t != PAD_ID])
        return rows

    def _decode_pieces(self, pieces, sampler, steering=None):
        """`(outputs, scores)` of each packed source in `pieces`, decoded
        with `sampler` in the batches of the preprocessor's padding rule,
        each steered by its `Steering` in `steering` (None: none): the output
        ids as decoded (EOS last where they end) and their scores, best
        first, without the placeholders of hypotheses the search never
        finished."""
        results = [None] * len(pieces)
        lengths = [len(piece) for piece in pieces]
        batches = self.preprocessor.batches(lengths, self.batch_size, self._static_shapes)
        decode, steps = self._decoder(sampler)[1], sum(width * -(-len(rows) // BATCH_SIZE) for rows, width in batches)
        if self._eager_start and steps <= self._eager_steps:
            decode, self._eager_steps = self._decoder(sampler, False)[1], self._eager_steps - steps
        else:
            self._eager_steps = 0  # the graph from now on
        for chunk, width in batches:
            chunk_steering = None if steering is None else [steering[i] for i in chunk]
            for i, result in zip(chunk, self._decode_batch(decode, [pieces[i] for i in chunk], width, chunk_steering)):
                results[i] = result
        return results

    def _decode_batch(self, decode, sources, width, steering=None):
        # Static shapes compile once per shape: rows go up to a power of two.
        rows = padded_rows(len(sources), self.batch_size) if self._static_shapes else len(sources)
        batch = np.zeros((rows, width), dtype="int32")
        batch[len(sources) :, 0] = EOS_ID  # filler rows: an empty source
        for i, ids in enumerate(sources):
            batch[i, : len(ids)] = ids
        tokens, scores = decode(batch, **_steering_arrays(steering or [], rows))
        tokens, scores = ops.convert_to_numpy(tokens)[: len(sources)], ops.convert_to_numpy(scores)[: len(sources)]
        if tokens.ndim == 2:  # one hypothesis a sentence: (rows, length) -> (rows, 1, length)
            tokens, scores = tokens[:, None], scores[:, None]
        return [
            ([_as_decoded(ids) for ids, score in zip(hypotheses, row_scores) if score > NEG_INF / 2],
             [float(score) for score in row_scores if score > NEG_INF / 2])
            for hypotheses, row_scores in zip(tokens, scores)
        ]


def _as_decoded(row):
    """A decoded row's ids up to its first EOS, EOS included, without the padding after."""
    row = [int(t) for t in row]
    if EOS_ID in row:
        return row[: row.index(EOS_ID) + 1]
    while row and row[-1] == PAD_ID:
        row.pop()
    return row


def _padded(rows):
    batch = np.zeros((len(rows), max(1, max(map(len, rows)))), dtype="int32")
    for i, row in enumerate(rows):
        batch[i, : len(row)] = row
    return batch


def _check_strings(name, texts):
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise ValueError(f"Argument `{name}` must be a list of strings. Received: {type(texts).__name__}")


def _check_phrases(name, lists):
    """`constraints`: one list of phrases per sentence (`check_phrases`)."""
    if isinstance(lists, str) or not all(isinstance(p, (list, tuple)) for p in lists):
        raise ValueError(f"Argument `{name}` must be a list of lists of strings, one list per sentence. Received: "
                         f"{type(lists).__name__} of {sorted({type(p).__name__ for p in lists})}")
    for index, phrases in enumerate(lists):
        check_phrases(f"{name}[{index}]", phrases)


def _steering_arrays(steering, rows):
    """The decoder's steering arguments of a batch's `steering` (one
    `Steering` per sentence; `rows` at least that many): `prefix` `(rows,
    prefix_length)` and `constraints` `(rows, constraints, phrase_length)`,
    PAD after each, for those any sentence uses. Their lengths are rounded
    up (a multiple of 8 tokens, as sources are padded; a power of two of
    phrases), so compiled decoders meet few shapes."""
    arrays = {}
    longest = max([len(s.prefix) for s in steering], default=0)
    if longest:
        arrays["prefix"] = np.zeros((rows, -(-longest // 8) * 8), dtype="int32")
        for i, s in enumerate(steering):
            arrays["prefix"][i, : len(s.prefix)] = s.prefix
    count = max([len(s.constraints) for s in steering], default=0)
    if count:
        length = max(len(ids) for s in steering for ids in s.constraints)
        arrays["constraints"] = np.zeros((rows, 1 << (count - 1).bit_length(), -(-length // 8) * 8), dtype="int32")
        for i, s in enumerate(steering):
            for j, ids in enumerate(s.constraints):
                arrays["constraints"][i, j, : len(ids)] = ids
    return arrays


def _offset_links(pieces):
    """The links of a sentence's pieces, each `(links, source words,
    continues a word, target words)`, as links of the whole sentence: each
    piece's words numbered after those of the pieces before it (a source
    window that starts inside a word goes on with that word)."""
    links, source_base, target_base = [], 0, 0
    for piece_links, source_words, continues, target_words in pieces:
        base = source_base - 1 if continues and source_base else source_base
        links += [(s + base, t + target_base) for s, t in piece_links]
        source_base, target_base = base + source_words, target_base + target_words
    return links
