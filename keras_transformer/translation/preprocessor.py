"""Strings to model-ready source ids and translations back to strings, by one set of rules.

Every path that translates text reads these rules here: the `Translator`,
the SavedModel export, the server and the command line.

- **Blank input.** An input that is empty or whitespace only (Python's
  `str.isspace`), or that the tokenizer turns into no ids, is not
  translated: its translation is `""`, with score 0.
- **Sentences.** With `split_sentences` (the default), each input is cut
  into its sentences and the whitespace around and between them
  (`keras_transformer.translation.sentences`: line breaks always cut), each sentence
  is a text of its own for the rules below, and an input's translation is
  its sentences' translations with its own whitespace put back between
  them: its line breaks, blank lines and outer whitespace kept exactly.
  Without it, an input is one text.
- **Text as it comes.** Invisible characters are normalized as each text
  is tokenized (`keras_transformer.translation.sentences.normalize`), on every path:
  translating, scoring, steering and training pairs.
- **Length.** A source holds at most `source_budget` tokens, its EOS
  included: the model's `max_length` less `max_extra_length`, so that an
  output has room to run past its source's length, but at least half of
  `max_length`.
- **Long input.** A text over the budget is never cut silently. It is
  cut after each sentence end followed by whitespace, whatever comes next
  (`keras_transformer.translation.sentences.cut_long`), each part translated on its
  own, a part still over the budget in windows of `source_budget - 1` ids;
  the translations are joined with one space, in order. With `long_inputs="truncate"` a text
  keeps its first `source_budget - 1` ids instead.
- **Joining.** An input's pieces come back as one translation: each
  text's pieces joined with one space (empty ones left out), its texts
  with the input's whitespace between them, the mean of their scores,
  the mean log-probability of all their tokens as its confidence, and
  their word links, each piece's words numbered after those of the pieces
  before it (a window that starts inside a word goes on with that word). A
  text's target prefix and constraints steer its first piece only.
- **Padding.** Where a batch may hold any number of rows (the SavedModel,
  the `Translator` on TensorFlow), a source is padded to the smallest of the
  `buckets` that holds it, whatever else its batch holds. Where each shape
  is compiled (JAX, XLA), a batch of sources sorted by length is padded to a
  multiple of `PAD_MULTIPLE` of its longest, and its rows go up to a power
  of two: one loop per batch, and few shapes to compile. Padding is masked:
  it changes no translation beyond floating-point rounding.
- **Training pairs.** A pair with a blank side is left out; a pair over
  `max_length` tokens on either side (special tokens included) is left out
  or truncated (`length_policy`); each is counted. The batches of pairs
  (token budgets, length buckets) are `keras_transformer.data.lengths`.

Two faces apply the rules and give the same ids: `texts`, `pieces`,
`join`, `frame` and `training_pairs` in Python (the `sentencepiece`
package, no TensorFlow: for JAX and PyTorch), and `texts_graph`,
`pieces_graph`, `join_graph` and `training_pairs_graph` in TensorFlow ops
(tensorflow-text), for the SavedModel's graph and tf.data.

Example:

>>> preprocessor = TranslationPreprocessor(tokenizer, max_length=256)
>>> texts, frames = preprocessor.texts(["Hi.", " ", "One.\nTwo."])
>>> texts, frames.owners
(['Hi.', 'One.', 'Two.'], [0, 2, 2])
>>> ids, owners = preprocessor.pieces(texts)   # each text short: one piece each
>>> translations = preprocessor.join(["Salut.", "Un.", "Deux."], owners, len(texts))
>>> preprocessor.frame(translations, frames)
['Salut.', '', 'Un.\nDeux.']
"""

import itertools
from typing import NamedTuple

import numpy as np

from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.tokens import (
    EOS_ID,
    PAD_ID,
    UNK_ID,
    pack_source,
    pack_source_ragged,
    pack_target,
    pack_target_ragged,
    source_capacity,
    target_capacity,
    unpack_output_ragged,
)
from keras_transformer.translation import sentences as sentence_rule
from keras_transformer.validation import check_bool, check_non_negative_int

LONG_INPUTS = ("split", "truncate")
LENGTH_POLICIES = ("drop", "truncate")
LENGTH_POLICY = "drop"  # the default: a training pair over `max_length` is left out
# The lengths a source is padded to, capped at the source budget.
DEFAULT_BUCKETS = (16, 32, 64, 128, 256)
# Compiled batches: their padded length is a multiple of this.
PAD_MULTIPLE = 8

# `str.isspace` as an RE2 class (TensorFlow's regular expressions): RE2's
# `\s` lacks `\v`, `\x1c`-`\x1f` and `\x85`, which Python counts as space.
_RE2_SPACE = r"[\s\v\x{1c}-\x{1f}\x{85}\pZ]"


class Frames(NamedTuple):
    """How a batch of inputs was cut into texts (`TranslationPreprocessor.texts`):
    each text's input (`owners`), and each input's whitespace: before its
    first text (`leads`), between its texts (`gaps`, a list per input) and
    after its last (`trails`). None of them without `split_sentences`."""

    count: int
    owners: list
    leads: list = None
    gaps: list = None
    trails: list = None


def is_blank(text):
    """Whether `text` is empty or whitespace only: nothing to translate."""
    return not text.strip()


def check_length_policy(length_policy):
    if length_policy not in LENGTH_POLICIES:
        raise ValueError(f"Argument `length_policy` must be one of {LENGTH_POLICIES}. Received: {length_policy!r}")


def tokenize_graph(op, strings, vocab_size=None):
    """Ids of `strings` `(n,)`, normalized (`sentences.normalize_graph`), by
    the SentencePiece `op`: ragged int32 `(n, None)`, each id at or past
    `vocab_size` (if given) the unknown id, as `SubwordTokenizer.encode`
    gives them."""
    import tensorflow as tf  # the graph face only: not the Python face's

    ids = tf.cast(op.tokenize(sentence_rule.normalize_graph(strings)), tf.int32)
    if vocab_size is None:
        return ids
    return ids.with_flat_values(tf.where(ids.flat_values < vocab_size, ids.flat_values, UNK_ID))


class GraphTokenizer:
    """A tokenizer's tensorflow-text SentencePiece ops, the graph face of a
    `SubwordTokenizer`: `source` and `target` (one op when one model serves
    both sides), whose `tokenize` gives the ids of `encode` (or
    `encode_target`) and `detokenize` the texts of `decode`.

    A new one for each graph (`TranslationPreprocessor.graph_tokenizer`):
    its ops own the model resources, and TensorFlow drops the resources of
    eager ops whenever `tf.random.set_seed` clears its kernel cache.
    """

    def __init__(self, tokenizer):
        import tensorflow_text as tf_text  # the graph face only: not the Python face's

        self.source = tf_text.SentencepieceTokenizer(model=tokenizer.model_proto)
        self.target = self.source
        if not tokenizer.shared:
            self.target = tf_text.SentencepieceTokenizer(model=tokenizer.target_model_proto)
        # Ids at or past a side's vocabulary (an imported model's) are unknown.
        self.limits = [size if size < processor.get_piece_size() else None for processor, size in (
            (tokenizer.processor, tokenizer.vocab_size), (tokenizer.target_processor, tokenizer.target_vocab_size))]

    def tokenize(self, strings, target=False):
        """Ids of `strings` `(n,)`, sources or `target`s: ragged int32 `(n, None)`."""
        op, limit = (self.target, self.limits[1]) if target else (self.source, self.limits[0])
        return tokenize_graph(op, strings, limit)

    def detokenize(self, ids):
        """The target texts `(n,)` of output ids `(n, length)`, dense 0-padded or ragged."""
        return self.target.detokenize(unpack_output_ragged(ids))

    def id_to_string(self, ids):
        """The target pieces of `ids`."""
        return self.target.id_to_string(ids)

    @property
    def ops(self):
        """The distinct SentencePiece ops, for a SavedModel to track."""
        return [self.source] if self.target is self.source else [self.source, self.target]


def _blank_graph(strings):
    """`is_blank` of each of `strings` `(n,)`, in TensorFlow ops."""
    import tensorflow as tf  # the graph face only: not the Python face's

    return tf.strings.regex_full_match(strings, _RE2_SPACE + "*")


def source_budget(max_length, max_extra_length=MAX_EXTRA_LENGTH):
    """The most tokens a source holds, EOS included (the rule above)."""
    return max(max_length - max_extra_length, max_length // 2, 2)


def resolve_buckets(buckets, budget):
    """`buckets` below `budget`, sorted, then `budget` itself."""
    if not isinstance(buckets, (list, tuple)) or not buckets or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 2 for b in buckets
    ):
        raise ValueError(f"Argument `buckets` must be a list or tuple of integers >= 2. Received: buckets={buckets!r}")
    return sorted({b for b in buckets if b < budget} | {budget})


def round_up(length, multiple=PAD_MULTIPLE):
    """`length` up to a multiple of `multiple`: a compiled batch's padded length."""
    return -(-length // multiple) * multiple


def power_of_two(count):
    """The smallest power of two >= `count` (1 for 0)."""
    return 1 << max(count - 1, 0).bit_length()


def padded_rows(rows, batch_size):
    """A compiled batch's rows: `rows` up to a power of two, at most
    `max(batch_size, rows)`."""
    return min(power_of_two(rows), max(batch_size, rows))


def power_of_two_graph(rows):
    """`power_of_two` of a scalar int32 tensor, in TensorFlow ops (the
    SavedModel's XLA batches, which may hold any number of rows)."""
    import tensorflow as tf  # the graph face only: not the Python face's

    powers = tf.constant([2**i for i in range(31)], tf.int32)
    return tf.gather(powers, tf.searchsorted(powers, rows[None])[0])


def frame_text(lead, texts, gaps, trail):
    """`lead + texts[0] + gaps[0] + texts[1] + ... + trail`."""
    return lead + "".join(text + gap for text, gap in zip(texts, [*gaps, ""])) + trail


def first_pieces(owners):
    """Whether each piece (of `owners`, in order) is its text's first: the
    piece its steering goes to."""
    seen = set()
    return [owner not in seen and not seen.add(owner) for owner in owners]


def join_pieces(texts, scores, log_probs, lengths, links=None):
    """`(text, score, confidence, alignment)` of one text from its pieces'
    `texts`, `scores`, total `log_probs` and `lengths` (tokens, EOS
    included), and, if given, their `links`, each `(links, source words,
    starts inside a word, target words)` (the rule above)."""
    tokens = sum(lengths)
    confidence = sum(log_probs) / tokens if tokens else 0.0
    alignment = None if links is None else pharaoh(offset_links(links))
    return " ".join(t for t in texts if t), float(np.mean(scores)), confidence, alignment


def pharaoh(links):
    """`"s-t s-t ..."` of `[(s, t)]` links."""
    return " ".join(f"{s}-{t}" for s, t in links)


def offset_links(pieces):
    """The links of a text's pieces, each `(links, source words, continues
    a word, target words)`, as links of the whole text."""
    links, source_base, target_base = [], 0, 0
    for piece_links, source_words, continues, target_words in pieces:
        base = source_base - 1 if continues and source_base else source_base
        links += [(s + base, t + target_base) for s, t in piece_links]
        source_base, target_base = base + source_words, target_base + target_words
    return links


def first_pieces_graph(owners, count):
    """`first_pieces` in TensorFlow ops: `(first, position of the owner's
    first piece)`, `(pieces,)` each, of `owners` over `count` texts."""
    import tensorflow as tf  # the graph face

    position = tf.range(tf.size(owners))
    start = tf.gather(tf.math.unsorted_segment_min(position, owners, count), owners)
    return start == position, start


def steering_graph(prefix_ids, phrase_ids, constraints, owners, count):
    """Each piece's target prefix ids, ragged `(pieces, None)`, and
    constraint ids `(pieces, constraints, phrase_length)`, PAD after each:
    its text's for the text's first piece, none for the others. From each
    of `count` texts' prefix ids, ragged `(count, None)`, and the ids of
    their `constraints` (a count per text), ragged `(count * constraints, None)`."""
    import tensorflow as tf  # the graph face

    first, _ = first_pieces_graph(owners, count)  # (pieces,)
    gathered = tf.gather(prefix_ids, owners)  # (pieces, None)
    lengths = tf.where(first, gathered.row_lengths(), tf.zeros_like(gathered.row_lengths()))
    prefixes = tf.RaggedTensor.from_tensor(gathered.to_tensor(default_value=PAD_ID), lengths=lengths)
    # (count * constraints, phrase_length + 1): "" has no tokens; a PAD column at least.
    phrases = tf.pad(phrase_ids.to_tensor(default_value=PAD_ID), [[0, 0], [0, 1]])
    phrases = tf.reshape(phrases, [count, constraints, tf.shape(phrases)[1]])
    phrases = tf.where(first[:, None, None], tf.gather(phrases, owners), PAD_ID)  # (pieces, constraints, length)
    return prefixes, phrases


def join_details_graph(log_probs, lengths, links, source_count, inside, target_count, owners, count, n_best):
    """`join_pieces`' confidence and alignment in TensorFlow ops: each
    text's `(count, n_best)` from its pieces' total `log_probs`, `lengths`,
    `links` `(pieces, n_best, length)` (-1 where none), source words, whether
    each starts inside a word, and target words, `(pieces, n_best)` each."""
    import tensorflow as tf  # the graph face

    total = tf.math.unsorted_segment_sum(log_probs, owners, count)
    tokens = tf.math.unsorted_segment_sum(tf.cast(lengths, tf.float32), owners, count)
    confidences = tf.math.divide_no_nan(total, tokens)  # (count, n_best)
    _, first = first_pieces_graph(owners, count)  # each piece's owner's first piece
    position = tf.range(tf.size(owners))

    def before(values, inclusive=False):
        """The sum of `values` `(pieces, n_best)` over the owner's pieces before each (or up to it)."""
        running = tf.cumsum(values, axis=0, exclusive=not inclusive)
        start = tf.gather(tf.cumsum(values, axis=0, exclusive=True), first)
        return running - start

    continues = tf.cast(tf.logical_and(inside, (position > first)[:, None]), tf.int32)
    source_base = before(source_count) - before(continues, inclusive=True)  # (pieces, n_best)
    target_base = before(target_count)
    valid = links >= 0  # (pieces, n_best, length)
    pairs = tf.strings.join([tf.strings.as_string(links + source_base[:, :, None]), "-",
                             tf.strings.as_string(tf.range(tf.shape(links)[-1])[None, None, :] + target_base[:, :, None])])
    pieces = tf.strings.strip(tf.strings.reduce_join(tf.where(valid, pairs + " ", ""), axis=-1))  # (pieces, n_best)
    return confidences, join_columns_graph(pieces, owners, count, n_best)


def join_columns_graph(strings, owners, count, columns):
    """Each of `count` texts' non-empty `strings` `(pieces, columns)`, joined
    with a space per column, in TensorFlow ops: `(count, columns)`."""
    import tensorflow as tf  # the graph face

    # Every column at once: string (piece, column) goes to text owner * columns + column, in piece order.
    flat = tf.reshape(strings, [-1])  # (pieces * columns,)
    segments = tf.reshape(owners[:, None] * columns + tf.range(columns)[None, :], [-1])
    kept = tf.strings.length(flat) > 0
    joined = tf.strings.unsorted_segment_join(tf.boolean_mask(flat, kept), tf.boolean_mask(segments, kept),
                                              count * columns, separator=" ")
    return tf.reshape(joined, [count, columns])


class TranslationPreprocessor:
    """Applies the rules above with one tokenizer and one model's lengths.

    Args:
        tokenizer: a `SubwordTokenizer`.
        max_length: int >= 2. The model's `max_length`.
        max_extra_length: int >= 0. Output tokens beyond a source's length.
        long_inputs: `"split"` (the default) or `"truncate"`.
        buckets: the lengths sources are padded to (capped at the budget).
        split_sentences: bool. Cut each input into its sentences, keeping
            its whitespace (the default), or translate it as one text.
    """

    def __init__(self, tokenizer, max_length, max_extra_length=MAX_EXTRA_LENGTH, long_inputs="split",
                 buckets=DEFAULT_BUCKETS, split_sentences=True):
        check_non_negative_int("max_extra_length", max_extra_length)
        check_bool("split_sentences", split_sentences)
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"Argument `max_length` must be an integer >= 2. Received: max_length={max_length!r}")
        if long_inputs not in LONG_INPUTS:
            raise ValueError(
                f"Argument `long_inputs` must be one of {LONG_INPUTS}. Received: long_inputs={long_inputs!r}"
            )
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.long_inputs = long_inputs
        self.source_budget = source_budget(max_length, max_extra_length)
        self.buckets = resolve_buckets(buckets, self.source_budget)
        self.split_sentences = split_sentences

    @property
    def room(self):
        """Ids a piece holds besides its EOS."""
        return source_capacity(self.source_budget)

    def bucket(self, length):
        """The padded length of a source of `length` tokens."""
        return next(b for b in self.buckets if b >= length)

    def batches(self, lengths, batch_size, compiled):
        """`[(indices, width)]`: the sources of `lengths` in batches of at
        most `batch_size`, sorted by length, each with its padded length."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        if compiled:
            chunks = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
            return [(c, min(round_up(lengths[c[-1]]), self.source_budget)) for c in chunks]
        batches = []
        for width, members in itertools.groupby(order, key=lambda i: self.bucket(lengths[i])):
            members = list(members)
            batches += [(members[start : start + batch_size], width) for start in range(0, len(members), batch_size)]
        return batches

    # ------------------------------------------------------------ Python
    def texts(self, inputs):
        """`(texts, frames)`: the texts of `inputs` in order, each a sentence
        of its input (with `split_sentences`; a blank input has none) or a
        whole input, and the `Frames` that `frame` puts them back into."""
        if not self.split_sentences:
            return list(inputs), Frames(len(inputs), list(range(len(inputs))))
        texts, frames = [], Frames(len(inputs), [], [], [], [])
        for index, text in enumerate(inputs):
            lead, found, gaps, trail = sentence_rule.segment(text)
            texts += found
            frames.owners.extend([index] * len(found))
            frames.leads.append(lead)
            frames.gaps.append(gaps)
            frames.trails.append(trail)
        return texts, frames

    def frame(self, translations, frames):
        """The translation of each input from its texts' `translations`:
        with its own whitespace around and between them (`""` for an input
        without a text)."""
        if frames.leads is None:
            return list(translations)
        parts = [[] for _ in range(frames.count)]
        for owner, translation in zip(frames.owners, translations):
            parts[owner].append(translation)
        return [frame_text(lead, part, gaps, trail) if part else ""
                for lead, part, gaps, trail in zip(frames.leads, parts, frames.gaps, frames.trails)]

    def pieces(self, texts):
        """`(ids, owners)`: each piece's packed source ids and the index of
        the text it comes from, in order; a blank text has no piece."""
        ids, owners = [], []
        for index, (text, tokens) in enumerate(zip(texts, self.tokenizer.encode(list(texts)))):
            for piece in self._split(text, tokens):
                ids.append(pack_source(piece))
                owners.append(index)
        return ids, owners

    def _split(self, text, tokens):
        if is_blank(text) or not tokens:
            return []
        if len(tokens) <= self.room or self.long_inputs == "truncate":
            return self.windows(tokens)
        sentences = sentence_rule.cut_long(text)
        return [
            window
            for sentence, ids in zip(sentences, self.tokenizer.encode(sentences))
            if not is_blank(sentence)
            for window in self.windows(ids)
        ]

    def id_pieces(self, sources):
        """`pieces` of model-ready ids (EOS last, no padding): `(ids,
        owners)`; a source over the budget in `windows` of its ids, each
        packed, and an empty one without a piece."""
        ids, owners = [], []
        for index, source in enumerate(sources):
            if len(source) > self.source_budget:
                windows = [pack_source(w) for w in self.windows(source[:-1] if source[-1] == EOS_ID else source)]
            else:
                windows = [source] if source else []
            ids += windows
            owners += [index] * len(windows)
        return ids, owners

    def windows(self, ids):
        """`ids` (no EOS) in windows of at most `room` ids, or truncated."""
        if self.long_inputs == "truncate":
            return [ids[: self.room]]
        return [ids[start : start + self.room] for start in range(0, len(ids), self.room)]

    def join(self, translations, owners, count):
        """The translation of each of `count` texts: its pieces'
        `translations`, the empty ones left out, joined with a space."""
        parts = [[] for _ in range(count)]
        for owner, translation in zip(owners, translations):
            if translation:
                parts[owner].append(translation)
        return [" ".join(part) for part in parts]

    # ------------------------------------------------------------ graph
    def graph_tokenizer(self):
        """A new `GraphTokenizer` of the tokenizer (its ops are `tf.Module`s
        that a SavedModel tracks), for the `..._graph` methods."""
        return GraphTokenizer(self.tokenizer)

    def detokenize_graph(self, ids, op):
        """Output ids `(n, length)` to their text `(n,)` string, as the
        tokenizer's `decode` does, with the `graph_tokenizer()`."""
        return op.detokenize(ids)

    def texts_graph(self, inputs):
        """`texts` in TensorFlow ops: `inputs` `(n,)` string to the texts
        `(texts,)` and their `Frames` (tensors: `count` a scalar, `owners`
        `(texts,)` int32, `leads` and `trails` `(n,)`, `gaps` ragged `(n, None)`)."""
        import tensorflow as tf  # the graph face only: not the Python face's

        count = tf.size(inputs)
        if not self.split_sentences:
            return inputs, Frames(count, tf.range(count))
        leads, texts, gaps, trails = sentence_rule.segment_graph(inputs)
        return texts.flat_values, Frames(count, tf.cast(texts.value_rowids(), tf.int32), leads, gaps, trails)

    def frame_graph(self, translations, frames):
        """`frame` in TensorFlow ops, for each of the `columns` of
        `translations` `(texts, columns)` string: `(n, columns)`."""
        import tensorflow as tf  # the graph face only: not the Python face's

        if frames.leads is None:
            return translations
        # Each text's gap after it: the next gap of its input, "" after its last.
        found = tf.math.bincount(frames.owners, minlength=frames.count, maxlength=frames.count)  # (n,)
        last = tf.RaggedTensor.from_row_lengths(tf.fill([tf.reduce_sum(tf.minimum(found, 1))], ""),
                                                tf.cast(tf.minimum(found, 1), tf.int64), validate=False)
        after = tf.concat([frames.gaps, last], axis=1).flat_values  # (texts,)
        # Every column at once: text t's column c goes to input owners[t] * columns + c, in text order.
        columns = translations.shape[1]
        segments = tf.reshape(frames.owners[:, None] * columns + tf.range(columns)[None, :], [-1])
        parts = tf.reshape(translations + after[:, None], [-1])  # (texts * columns,)
        joined = tf.reshape(tf.strings.unsorted_segment_join(parts, segments, frames.count * columns),
                            [frames.count, columns])
        return tf.where(found[:, None] > 0, frames.leads[:, None] + joined + frames.trails[:, None], "")

    def pieces_graph(self, inputs, op=None):
        """`pieces` in TensorFlow ops: `inputs` `(batch,)` string to a ragged
        int32 `(pieces, None)` of packed source ids and their owners
        `(pieces,)`, with the `graph_tokenizer()` (a new one if None)."""
        import tensorflow as tf  # the graph face only: not the Python face's

        op = self.graph_tokenizer() if op is None else op

        blank = _blank_graph(inputs)
        input_ids = op.tokenize(inputs)  # (batch, None)
        split = input_ids.row_lengths() > self.room
        split = tf.logical_and(split, tf.logical_not(blank)) if self.long_inputs == "split" else tf.zeros_like(blank)
        rows = tf.range(tf.size(inputs))
        sentences = sentence_rule.cut_long_graph(tf.boolean_mask(inputs, split))  # (long inputs, None)
        texts = tf.concat([tf.boolean_mask(inputs, ~split), sentences.flat_values], 0)
        ids = tf.concat([tf.ragged.boolean_mask(input_ids, ~split), op.tokenize(sentences.flat_values)], 0)
        owners = tf.concat([tf.boolean_mask(rows, ~split),
                            tf.gather(tf.boolean_mask(rows, split), tf.cast(sentences.value_rowids(), tf.int32))], 0)
        order = tf.argsort(owners, stable=True)  # the pieces in input order, a split input's in its order
        texts, ids, owners = tf.gather(texts, order), tf.gather(ids, order), tf.gather(owners, order)
        keep = tf.logical_not(_blank_graph(texts)) & (ids.row_lengths() > 0)
        ids, owners = tf.ragged.boolean_mask(ids, keep), tf.boolean_mask(owners, keep)
        if self.long_inputs == "truncate":
            ids = ids[:, : self.room]
        else:
            ids, owners = self._windows_graph(ids, owners)
        return pack_source_ragged(ids), owners

    def _windows_graph(self, ids, owners):
        """`windows` of each row of the ragged `ids`, their owners repeated."""
        import tensorflow as tf  # the graph face only: not the Python face's

        lengths = tf.cast(ids.row_lengths(), tf.int32)
        count = (lengths + self.room - 1) // self.room  # (n,): windows per row, at least 1
        first = tf.cumsum(count, exclusive=True)  # (n,): each row's first window
        rows = tf.cast(ids.value_rowids(), tf.int32)
        position = tf.range(tf.size(ids.flat_values)) - tf.gather(tf.cast(ids.row_starts(), tf.int32), rows)
        windows = tf.RaggedTensor.from_value_rowids(
            ids.flat_values, tf.gather(first, rows) + position // self.room, nrows=tf.reduce_sum(count), validate=False
        )
        return windows, tf.repeat(owners, count)

    def join_graph(self, translations, scores, owners, count):
        """`join` in TensorFlow ops, for each of the `n` columns of
        `translations` `(pieces, n)` string; each text's score per column is
        the mean of its pieces' `scores` `(pieces, n)` (0 for a blank text).

        Returns `(texts, scores)`, `(count, n)` each.
        """
        import tensorflow as tf  # the graph face only: not the Python face's

        texts = join_columns_graph(translations, owners, count, translations.shape[1])
        return texts, tf.math.unsorted_segment_mean(scores, owners, count)

    # ------------------------------------------------------------ training pairs
    def training_pairs(self, pairs, length_policy=LENGTH_POLICY):
        """`(sources, targets, counts)`: the packed ids of each `(source,
        target)` string pair kept for training, in order, and `counts`
        `[kept, dropped, truncated, blank]` (`kept` includes `truncated`)."""
        check_length_policy(length_policy)
        pairs = list(pairs)
        encoded = zip(self.tokenizer.encode([s for s, _ in pairs]), self.tokenizer.encode_target([t for _, t in pairs]))
        source_room, target_room = source_capacity(self.max_length), target_capacity(self.max_length)
        sources, targets, counts = [], [], [0, 0, 0, 0]
        for (source, target), (source_ids, target_ids) in zip(pairs, encoded):
            if is_blank(source) or is_blank(target) or not source_ids or not target_ids:
                counts[3] += 1
                continue
            over = len(source_ids) > source_room or len(target_ids) > target_room
            if over and length_policy == "drop":
                counts[1] += 1
                continue
            sources.append(pack_source(source_ids[:source_room]))
            targets.append(pack_target(target_ids[:target_room]))
            counts[0] += 1
            counts[2] += over
        return sources, targets, counts

    def training_pairs_graph(self, sources, targets, op, length_policy=LENGTH_POLICY):
        """`training_pairs` in TensorFlow ops: `sources` and `targets` `(n,)`
        string to ragged int32 packed ids `(kept, None)` each, and the counts
        `(4,)` int64, with the `graph_tokenizer()`."""
        import tensorflow as tf  # the graph face only: not the Python face's

        check_length_policy(length_policy)
        source_ids, target_ids = op.tokenize(sources), op.tokenize(targets, target=True)  # (n, None) each
        blank = _blank_graph(sources) | _blank_graph(targets)
        blank |= (source_ids.row_lengths() == 0) | (target_ids.row_lengths() == 0)  # (n,)
        source_room, target_room = source_capacity(self.max_length), target_capacity(self.max_length)
        over = ~blank & ((source_ids.row_lengths() > source_room) | (target_ids.row_lengths() > target_room))
        keep = ~blank & ~over if length_policy == "drop" else ~blank
        source_ids = tf.ragged.boolean_mask(source_ids, keep)[:, :source_room]
        target_ids = tf.ragged.boolean_mask(target_ids, keep)[:, :target_room]
        count = lambda mask: tf.reduce_sum(tf.cast(mask, tf.int64))  # noqa: E731
        counts = tf.stack([count(keep), count(over & ~keep), count(over & keep), count(blank)])
        return pack_source_ragged(source_ids), pack_target_ragged(target_ids), counts
