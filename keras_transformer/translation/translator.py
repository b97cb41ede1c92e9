"""The translation task: a model, its preprocessor and a sampler, text in and text out."""

from keras_transformer.decoding import BeamSampler, RandomSampler, get_sampler
from keras_transformer.decoding.common import model_max_length, penalty_value
from keras_transformer.decoding.defaults import ALPHA, BATCH_SIZE, BEAM_SIZE, MAX_EXTRA_LENGTH, STOP
from keras_transformer.models import presets
from keras_transformer.tokens import EOS_ID, pack_source, unpack_output
from keras_transformer.translation import loading, marian, markup, saved_model_files
from keras_transformer.translation import request_checks as checks
from keras_transformer.translation.alignment import piece_kinds
from keras_transformer.translation.marian import preset as marian_preset
from keras_transformer.translation.outputs import Hypothesis, TokenScores, prediction  # noqa: F401 - also of this module
from keras_transformer.translation.preprocessor import DEFAULT_BUCKETS, TranslationPreprocessor, frame_text, join_pieces
from keras_transformer.translation.runner import EAGER_STEPS, DecodeRunner, Steering
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.validation import check_positive

# The Translator's decoding options, which the export and the command line pass on.
DECODING_OPTIONS = ("beam_size", "alpha", "stop", "max_extra_length", "narrow_batches", "long_inputs", "buckets",
                    "split_sentences", "length_penalty")


class Translator:
    """Translates sentences with a trained `Transformer`.

    It holds the model, a `TranslationPreprocessor` (the rules for blank,
    long, padded and split inputs: `keras_transformer.translation.preprocessor`), a
    sampler (greedy decoding for `beam_size=1`, else beam search) and a
    `DecodeRunner` (the backend, eager or graph, and the decoders it keeps:
    `keras_transformer.translation.runner`). Requests are checked by
    `keras_transformer.translation.request_checks`. `hypotheses()` returns the n best
    with their scores, confidences and word alignments, `score()` scores
    given translations, and a call may sample instead (docs/decoding.md).
    `translate()` and the SavedModel that `export()` writes run the same
    rules and the same sampler, so they give the same translations.

    Args:
        model: a `Transformer` (or an object with `encode`, `init_cache`,
            `decode` and a `transformer_config.max_length`).
        tokenizer: a `SubwordTokenizer`; needed by `translate()` and
            `export()`, not by `translate_ids()`.
        beam_size: int >= 1. 1 decodes greedily.
        alpha: float >= 0. Length penalty of beam search.
        stop: `"early"` (the default) or `"exact"`: when beam search is
            done with a sentence. `"early"`: once the best candidate of a
            step has ended, as CTranslate2 and OpenNMT-py stop: fewer steps,
            and now and then a translation that `"exact"` would have beaten.
            `"exact"`: once no alive hypothesis can beat its best finished
            ones, so the search returns what it would find by running to
            the length limit (`keras_transformer.decoding.beam_search`).
        length_penalty: the penalty's kind: `"gnmt"`, GNMT's ((5 + length) /
            6) ** alpha, or `"huggingface"`, length ** alpha, with which beam
            search also stops as Hugging Face's `generate` does
            (`decoding.beam_search`); `alpha=1.0` with it reproduces
            `generate(num_beams=beam_size)`'s defaults.
        max_extra_length: int >= 0. Each output may be up to its source
            length + `max_extra_length` tokens (capped by the model).
        batch_size: int >= 1. Sentences per decoding batch.
        jit_compile: `"auto"`, True or False. `"auto"`: the fastest way to
            translate lists of sentences on each backend: on TensorFlow the
            SavedModel's own decoding (one graph without XLA), after
            `eager_steps` decoding steps taken eagerly; `jax.jit` on JAX,
            eager on PyTorch. True: XLA on TensorFlow (each batch shape
            compiles for seconds), `jax.jit` on JAX. False: eager.
        narrow_batches: bool. Compiled decoding (JAX, XLA): a batch goes on
            half as wide, then a quarter, as its sentences finish
            (`narrow_batches="halves"`, `keras_transformer.decoding.loop`):
            faster once compiled, but each batch shape compiles about twice
            as long. Uncompiled decoding drops each finished sentence anyway.
        long_inputs: `"split"` (an input over the model's source budget is
            split at sentence ends, or into windows) or `"truncate"`.
        buckets: the source lengths batches are padded to.
        split_sentences: bool. Translate each input sentence by sentence,
            keeping its line breaks and whitespace (the default), or whole
            (`keras_transformer.translation.preprocessor`, "Sentences").
        eager_steps: int >= 0. With `jit_compile="auto"` on TensorFlow, the
            decoding steps (each batch counted as its padded length) taken
            eagerly before a call that would exceed them traces the graph,
            which every later call runs (`runner.EAGER_STEPS`); 0: the graph
            from the first call. What is left is `runner.eager_steps_left`.

    Example:

    >>> translator = Translator.from_preset("tatoeba_en_fr", beam_size=4, alpha=0.6)
    >>> translator.translate(["I love you.", ""])
    ["Je t'aime.", '']
    >>> translator.hypotheses(["I love you."], n_best=2, alignments=True)[0][1]
    Hypothesis(text='Je vous aime.', score=-1.426..., confidence=-0.387..., alignment='0-0 2-1 1-2')
    >>> translator.score(["I love you."], ["Je t'aime."])[0].score
    -0.692...
    >>> translator.translate(["I love you."], sampler=RandomSampler(top_p=0.9, seed=1))
    >>> from keras_transformer.export import write_saved_model  # the same translations, as a SavedModel
    >>> write_saved_model(translator, "saved_models/tatoeba_en_fr")
    """

    def __init__(self, model, tokenizer=None, beam_size=BEAM_SIZE, alpha=ALPHA, max_extra_length=MAX_EXTRA_LENGTH,
                 batch_size=BATCH_SIZE, jit_compile="auto", narrow_batches=False, long_inputs="split",
                 buckets=DEFAULT_BUCKETS, eager_steps=EAGER_STEPS, stop=STOP, split_sentences=True,
                 length_penalty="gnmt"):
        check_positive("batch_size", batch_size)
        max_length = model_max_length(model)
        if max_length is None:
            raise ValueError("Argument `model` must have a `max_length` (its `transformer_config`).")
        self.model, self.tokenizer = model, tokenizer
        # Terminology constraints are met as whole words of a subword
        # tokenizer's (a word tokenizer's tokens are whole words).
        continues_word = getattr(tokenizer, "continues_word", None)
        self.continues_word = None if continues_word is None else continues_word()
        self.sampler = get_sampler(beam_size, alpha, continues_word=self.continues_word, stop=stop,
                                   length_penalty=length_penalty)
        self.alpha, self.stop, self.length_penalty = self.sampler.alpha, stop, self.sampler.length_penalty
        self.preprocessor = TranslationPreprocessor(tokenizer, max_length, max_extra_length, long_inputs, buckets,
                                                    split_sentences)
        self.max_extra_length, self.batch_size = max_extra_length, batch_size
        self.runner = DecodeRunner(model, self.preprocessor, max_extra_length, batch_size, jit_compile,
                                   narrow_batches, eager_steps)
        self.jit_compile, self.narrow_batches = jit_compile, narrow_batches
        config = getattr(model, "transformer_config", None)
        self.vocab_size = getattr(config, "vocab_size", None)
        self.target_vocab_size = getattr(config, "target_vocab_size", None) or self.vocab_size
        self._piece_kinds = None  # what each piece is to a text's words, for alignments
        self.runner.decoder(self.sampler)  # made (and the model built) before the first call

    @property
    def beam_size(self):
        return self.sampler.get_config()["beam_size"]

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """A `Translator` with the model and tokenizer of `preset`, a shipped
        preset name (`keras_transformer.list_presets()`) or a directory
        written by `save_to_preset`, or a Marian model converted as it
        loads: a Hugging Face Marian folder, a Marian folder or
        `hf://org/name` (`keras_transformer.translation.marian`); `kwargs`:
        the other arguments."""
        if marian.is_marian(preset):
            return cls(*marian_preset.load(preset)[:2], **kwargs)
        return cls(presets.load_model(preset), SubwordTokenizer.from_preset(preset), **kwargs)

    @classmethod
    def from_saved_model(cls, path, **kwargs):
        """The `Translator` an exported SavedModel was traced from, read from
        its folder `path` (a model folder or one version folder) without
        loading its graph (`saved_model_files.read_translator_parts`): it
        translates as the SavedModel's `serving_default` does. `kwargs`: the
        options that are not decoding settings (`batch_size`, `jit_compile`).
        """
        given = sorted(set(kwargs) & set(DECODING_OPTIONS))
        if given:
            raise ValueError(f"A SavedModel decodes as it was exported: {', '.join(given)} cannot change. "
                             f"Received: {', '.join(f'{name}={kwargs[name]!r}' for name in given)}")
        model, tokenizer, settings = saved_model_files.read_translator_parts(path)
        # An export that records no stop rule was made before the option, by
        # the exact rule; one without split_sentences, before sentences were split.
        settings = {"stop": "exact", "split_sentences": False, **settings}
        return cls(model, tokenizer, **{name: settings[name] for name in DECODING_OPTIONS if name in settings},
                   **kwargs)

    @classmethod
    def load(cls, path_or_name, tokenizer=None, weights=None, quantize=None, **kwargs):
        """A `Translator` of any model the command line takes
        (`keras_transformer.translation.loading`): a preset name or folder, a SavedModel
        folder (`from_saved_model`), a training run folder with `weights`,
        or a `.keras` file with its `tokenizer` (a `.model` file or a
        `SubwordTokenizer`); `quantize="int8"` quantizes the weights at
        load. `kwargs`: the other arguments of `Translator`.
        """
        if loading.model_kind(path_or_name, weights) == loading.SAVED_MODEL:
            decoding = {name: kwargs.pop(name) for name in DECODING_OPTIONS if name in kwargs}
            loading.no_options_with_saved_model(path_or_name, tokenizer=tokenizer, weights=weights, quantize=quantize,
                                                **decoding)
            return cls.from_saved_model(path_or_name, **kwargs)
        return cls(*loading.load_model(path_or_name, tokenizer, weights, quantize), **kwargs)

    def translate(self, sentences, sampler=None, target_prefix=None, constraints=None, format="text"):
        """Translates a list of strings; returns a list of strings.

        Each string is translated sentence by sentence, its line breaks and
        whitespace kept (`split_sentences`). Placeholders (`{0}`, `%s`,
        URLs, e-mail addresses) come back unchanged, each where its word
        alignment puts it (`keras_transformer.translation.markup`).

        `sampler`: None (this translator's search) or a `RandomSampler`.
        `target_prefix`: None, or one string per sentence (`""` for none)
        that its translation starts with (`decoding.loop.force_prefix`).
        `constraints`: None, or one list of strings per sentence (`[]` for
        none) that its translation holds, by lexically constrained beam
        search (`keras_transformer.decoding.constraints`). Both steer the
        first piece of an input, and take no placeholders or markup.
        `format`: `"text"` or `"html"`: tags out, the text translated, each
        tag put back around the words aligned to those it wrapped.
        """
        self._need_tokenizer("translate")
        checks.check_strings("sentences", sentences)
        markup.check_format(format)
        sentences = list(sentences)
        if format == "text" and not any(map(markup.has_placeholders, sentences)):
            return self._translate(sentences, sampler, target_prefix, constraints)
        for name, value in (("target_prefix", target_prefix), ("constraints", constraints)):
            if value is not None:
                raise ValueError(f"Argument `{name}` steers plain text: not markup or placeholders. Received: "
                                 f"{name}={value!r} with format={format!r}")

        def align(texts):
            return [(best.text, best.alignment) for best, *_ in self.hypotheses(texts, sampler=sampler,
                                                                                  alignments=True)]

        return markup.translate(sentences, format, align, lambda texts: self._translate(texts, sampler))

    def _translate(self, inputs, sampler=None, target_prefix=None, constraints=None):
        """`translate` of plain text."""
        texts, frames, pieces, owners = self._pieces(inputs)
        sampler = self._sampler(1, sampler)
        inputs_of = [frames.owners[owner] for owner in owners]
        steering = self._steering(target_prefix, constraints, pieces, inputs_of, len(inputs), sampler)
        outputs = [found[0] for found, _ in self.runner.decode(pieces, sampler, steering)]
        translations = self.tokenizer.decode(outputs) if outputs else []
        return self.preprocessor.frame(self.preprocessor.join(translations, owners, len(texts)), frames)

    def hypotheses(self, sentences, n_best=1, sampler=None, alignments=False, target_prefix=None, constraints=None):
        """The `n_best` best translations of each sentence, with their scores.

        Args:
            sentences: a list of strings.
            n_best: int in [1, beam_size]: hypotheses per sentence, best
                first, from beam search (fewer where the search finished
                fewer).
            sampler: None, or a `RandomSampler` (then `n_best` is 1).
            alignments: bool. Also align each hypothesis's words to its
                sentence's (`keras_transformer.translation.alignment`).
            target_prefix, constraints: as `translate`'s.

        Returns:
            A list of lists of `Hypothesis` (`keras_transformer.translation.outputs`). A
            blank sentence has one empty hypothesis scored 0; an input split
            into pieces is joined by the preprocessor's rule.
        """
        self._need_tokenizer("translate")
        checks.check_strings("sentences", sentences)
        texts, frames, pieces, owners = self._pieces(sentences)
        sampler = self._sampler(n_best, sampler)
        inputs_of = [frames.owners[owner] for owner in owners]
        steering = self._steering(target_prefix, constraints, pieces, inputs_of, len(sentences), sampler)
        results = self.runner.decode(pieces, sampler, steering)
        members = [[] for _ in sentences]  # each input's pieces
        for piece, owner in enumerate(inputs_of):
            members[owner].append(piece)
        texts_of = [[] for _ in sentences]  # each input's texts
        for text, owner in enumerate(frames.owners):
            texts_of[owner].append(text)
        hypotheses = [[] for _ in sentences]
        for rank in range(max([len(outputs) for outputs, _ in results], default=0)):
            outputs = [texts[rank] if rank < len(texts) else None for texts, _ in results]
            links = self._alignments(pieces, outputs) if alignments else None
            for index, group in enumerate(members):
                if group and all(rank < len(results[p][0]) for p in group):
                    hypotheses[index].append(self._join(group, results, rank, links, owners, frames, index,
                                                                    texts_of[index]))
        blank = Hypothesis("", 0.0, 0.0, "" if alignments else None)
        return [found or [blank] for found in hypotheses]

    def score(self, sources, targets):
        """Scores given translations: `targets[i]` as a translation of `sources[i]`.

        Each side is tokenized whole and packed (EOS appended), as in
        training; a side over the model's `max_length` raises `ValueError`.
        Returns a list of `TokenScores` (`keras_transformer.translation.outputs`).
        """
        for name, texts in (("sources", sources), ("targets", targets)):
            checks.check_strings(name, texts)
        if len(sources) != len(targets):
            raise ValueError("Arguments `sources` and `targets` must have the same length. "
                             f"Received: {len(sources)} sources, {len(targets)} targets")
        self._need_tokenizer("score")
        source_ids = [pack_source(ids) for ids in self.tokenizer.encode(list(sources))]
        target_ids = [[*ids, EOS_ID] for ids in self.tokenizer.encode_target(list(targets))]
        checks.check_score_pairs(source_ids, target_ids, self.preprocessor.max_length, ("sources", "targets"),
                                 (sources, targets))
        results = self.score_ids(source_ids, target_ids)
        return [r._replace(tokens=self.tokenizer.id_to_piece(r.tokens)) for r in results]

    def score_ids(self, source_ids, target_ids):
        """`score` of model-ready ids: packed sources, and targets as the
        search outputs them (EOS last where they end). Returns a list of
        `TokenScores` whose `tokens` are the target ids."""
        sources = checks.check_token_ids("source_ids", source_ids, self.vocab_size)
        targets = checks.check_token_ids("target_ids", target_ids, self.target_vocab_size)
        checks.check_score_pairs(sources, targets, self.preprocessor.max_length)
        return [TokenScores(target, probs, sum(probs),
                            sum(probs) / penalty_value(len(target), self.alpha, self.length_penalty))
                for target, probs in zip(targets, self.runner.force(sources, targets))]

    def translate_ids(self, source_ids):
        """Translates model-ready source ids: lists of ints (EOS appended,
        no padding needed), or an int array `(batch, length)` padded with 0.
        A source over the budget is cut into windows (or truncated) by the
        preprocessor, and the windows' outputs are concatenated. Returns
        lists of output ids, without BOS, EOS and padding."""
        sources = checks.check_token_ids("source_ids", source_ids, self.vocab_size)
        pieces, owners = self.preprocessor.id_pieces(sources)
        results = [[] for _ in sources]
        for owner, (outputs, _) in zip(owners, self.runner.decode(pieces, self.sampler)):
            results[owner] += unpack_output(outputs[0])
        return results

    # ------------------------------------------------------------ internals
    def _need_tokenizer(self, method):
        if self.tokenizer is None:
            raise ValueError(f"`{method}()` needs a tokenizer. Received: tokenizer=None")

    def _pieces(self, inputs):
        """`(texts, frames, pieces, owners)`: the preprocessor's texts of
        `inputs` and their frames, and the texts' pieces and their owners."""
        texts, frames = self.preprocessor.texts(list(inputs))
        return (texts, frames, *self.preprocessor.pieces(texts))

    def _steering(self, target_prefix, constraints, pieces, owners, count, sampler):
        """Each piece's `Steering` (a sentence's goes to its first piece),
        or None when nothing steers the call; the request's rules are
        `keras_transformer.translation.request_checks`'."""
        prefixes, phrases = checks.check_steering(target_prefix, constraints, count, self.beam_size, sampler)
        if prefixes is None and phrases is None:
            return None
        sentences = checks.sentence_steering(self.tokenizer, prefixes, phrases, count)
        steering = [Steering(*s) for s in checks.piece_steering(
            sentences, pieces, owners, self.max_extra_length, self.preprocessor.max_length, prefixes, phrases)]
        return steering if any(s.prefix or s.constraints for s in steering) else None

    def _sampler(self, n_best, sampler):
        """The sampler of a call: this translator's, its search with
        `n_best` hypotheses, or `sampler`."""
        if sampler is not None and not isinstance(sampler, RandomSampler):
            raise ValueError(f"Argument `sampler` must be a `RandomSampler` or None. Received: {sampler!r}")
        checks.check_n_best(n_best, self.beam_size, sampling=sampler is not None)
        if sampler is not None or n_best == 1:
            return sampler or self.sampler
        return BeamSampler(self.beam_size, self.alpha, num_return=n_best, continues_word=self.continues_word,
                           stop=self.stop, length_penalty=self.length_penalty)

    def _join(self, group, results, rank, links, owners, frames, index, texts):
        """The `Hypothesis` of `rank` of input `index` from its pieces,
        `group`, each of the text `owners[piece]` of its `texts`, framed by
        `frames`."""
        outputs = [results[p][0][rank] for p in group]
        scores = [results[p][1][rank] for p in group]
        log_probs = [score * penalty_value(len(ids), self.alpha, self.length_penalty)
                     for score, ids in zip(scores, outputs)]
        decoded = self.tokenizer.decode(outputs)
        _, score, confidence, alignment = join_pieces(decoded, scores, log_probs, list(map(len, outputs)),
                                                      None if links is None else [links[p] for p in group])
        joined = self.preprocessor.join(decoded, [texts.index(owners[p]) for p in group], len(texts))
        if frames.leads is not None:
            joined = [frame_text(frames.leads[index], joined, frames.gaps[index], frames.trails[index])]
        return Hypothesis(joined[0], score, confidence, alignment)

    def _alignments(self, pieces, outputs):
        """Each piece's word links to its output (`DecodeRunner.links`)."""
        if self._piece_kinds is None:
            self._piece_kinds = piece_kinds(self.tokenizer)
        return self.runner.links(pieces, outputs, self._piece_kinds)
