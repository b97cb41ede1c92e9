"""A `Translator` traced into a SavedModel that translates strings.

The SavedModel's `serving_default` signature takes `inputs: tf.string
[batch]` and returns `translations: tf.string [batch]` and `scores:
tf.float32 [batch]` (plus `nbest_translations` and `nbest_scores` of shape
`[batch, n_best]` when `n_best > 1`, where a hypothesis the search did not
finish, and a blank input's ranks after its one empty translation, are
placeholders scored `NEG_INF`). An export may add beside it
(`signatures`, of `SIGNATURES`; docs/decoding.md):
- `details(inputs)` adds `confidences` and `alignments` (Pharaoh strings),
  and `nbest_confidences` and `nbest_alignments` with `n_best > 1`;
- `sample(inputs, seed, temperature, top_k, top_p)`, scalars, samples
  (`RandomSampler`), with the outputs of `details`;
- `score(inputs, targets)` returns `scores`, `totals`, `tokens` `[batch,
  length]` (pieces, "" after the last) and `token_log_probs`;
- `steer(inputs, target_prefix, constraints)`, each translation starting
  with its prefix (`""`: none) and holding each of its constraints
  (`[batch, constraints]`, `""` after the last), as
  `Translator.translate(target_prefix=..., constraints=...)`, with the
  outputs of `details`. Its graph checks each call by the `Translator`'s
  rules (`request_checks.check_steering_graph`): a prefix or constraints
  with no room, or with a piece outside the vocabulary, fail the call with
  an `InvalidArgumentError` that names the argument (a 400 from TF Serving).

`SIGNATURE_INPUTS` lists each signature's inputs.

The translator's preprocessor
(`TranslationPreprocessor.pieces_graph`, tensorflow-text's SentencePiece
op; the tokenizer model is also in the SavedModel's assets, with an
imported model's target model beside it), its sampler (a
`tf.while_loop` from `keras.ops.while_loop`) and the joining of pieces all
run inside the graph, built from stock TensorFlow and tensorflow-text ops,
so TF Serving or plain `tf.saved_model.load` serve it without this package.
Blank, long and padded inputs follow the rules of
`keras_transformer.translation.preprocessor`, as `Translator.translate` does; they never
fail the batch.

The pieces of each bucket are decoded together, in a branch of the graph
that calls the one search traced for any width, so a short sentence never
pays for a long one in the same request. Within a bucket, a sentence
leaves the batch at the step its beam search is done, and the bucket's
sentences are split between `parallel_loops` loops that TensorFlow runs
side by side. With `jit_compile=True` (XLA) the batch keeps its rows, or,
with the translator's `narrow_batches`, narrows to its half and then its
quarter as its sentences finish.
"""

import contextlib
import functools
import json
import os
import secrets
import shutil

import keras

from keras_transformer import locks
from keras_transformer.compat.saved_model import keep_cond_functional
from keras_transformer.decoding import BeamSampler, RandomSampler
from keras_transformer.decoding.common import NEG_INF, length_penalty
from keras_transformer.decoding.defaults import ALIGNMENT_LAYER
from keras_transformer.decoding.scoring import force_decode
from keras_transformer.export.warmup import check_batch_sizes, write_warmup_requests
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, pack_source_ragged
from keras_transformer.translation.alignment import piece_kinds, word_links
from keras_transformer.translation.preprocessor import join_details_graph, steering_graph
from keras_transformer.translation.request_checks import (
    check_constraints_searchable,
    check_n_best,
    check_score_graph,
    check_steering_graph,
)
from keras_transformer.translation.runner import graph_decoder
from keras_transformer.translation.saved_model_files import next_version
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.translation.translator import DECODING_OPTIONS, Translator
from keras_transformer.validation import check_bool, check_positive

# The signatures a SavedModel may have besides `serving_default` (module docstring).
SIGNATURES = ("details", "sample", "score", "steer")
# Each signature's inputs, `{name: (dtype, rank)}`: `[batch]` strings, `sample`'s scalars, `steer`'s
# `[batch, constraints]`.
_SAMPLE_SCALARS = {"seed": ("int32", 0), "temperature": ("float32", 0), "top_k": ("int32", 0), "top_p": ("float32", 0)}
SIGNATURE_INPUTS = {
    "serving_default": {"inputs": ("string", 1)},
    "details": {"inputs": ("string", 1)},
    "sample": {"inputs": ("string", 1), **_SAMPLE_SCALARS},
    "score": {"inputs": ("string", 1), "targets": ("string", 1)},
    "steer": {"inputs": ("string", 1), "target_prefix": ("string", 1), "constraints": ("string", 2)},
}

# Loops a bucket's sentences are split between in the graph without XLA:
# about one per core on the 2-core machines it was tuned on.
PARALLEL_LOOPS = 2


def graph_search(translator, sampler, jit_compile=False, parallel_loops=1, steered=False, model=None):
    """The graph function `source [, prefix, constraints] -> (ids, scores)`
    that decodes one bucket's pieces with `sampler`, traced for any width
    (`build_translate_fn`). Signatures that decode alike (serving_default
    and details) call one: the SavedModel holds, loads and optimizes its
    search once."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    search = functools.partial(translator.runner.search(sampler, static_shapes=jit_compile), model or translator.model)
    decode = graph_decoder(search, jit_compile, parallel_loops, sampler.get_config().get("num_return", 1))
    ids = tf.TensorSpec([None, None], tf.int32)
    specs = [ids, ids, tf.TensorSpec([None, None, None], tf.int32)] if steered else [ids]
    return tf.function(decode, input_signature=specs, autograph=False)


def graph_pieces(translator, op):
    """The graph function `inputs [batch] string -> (texts, Frames, pieces'
    ids (pieces, None), each piece's text (pieces,))`: the preprocessor's
    sentences and pieces (`build_translate_fn`), which every translating
    signature calls: the SavedModel holds and loads them once."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    preprocessor = translator.preprocessor

    def pieces(inputs):
        texts, frames = preprocessor.texts_graph(inputs)  # each input's sentences (`split_sentences`)
        ids, pieces_of = preprocessor.pieces_graph(texts, op)
        return texts, frames, ids, pieces_of

    return tf.function(pieces, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)


def build_translate_fn(translator, op, sampler, pieces, piece_details, n_best=1, jit_compile=False, parallel_loops=1,
                       details=False, steered=False, model=None, decode=None):
    """The graph function `inputs [batch] string -> dict of outputs`: the
    preprocessor's pieces, decoded by `sampler` (its `n_best` hypotheses),
    joined; with `details`, also each hypothesis's confidence and word
    alignment (`Translator.hypotheses`). With `steered`, the function
    takes `target_prefix [batch] string` and `constraints [batch,
    constraints] string` too: each input's first piece starts its output
    with its prefix's tokens, and holds its constraints.

    Each bucket's pieces are decoded together, by one search traced for
    any width (a function each bucket calls): the search's output buffer
    and cache follow the width the pieces have when the graph runs, so one
    copy in the graph serves every bucket, traced once at export and
    optimized once when a sentence first needs it. `model` is what the
    search decodes with (default: the translator's model; the export's
    `FrozenModel` of it). `pieces` and `piece_details`: the
    `graph_pieces` and `graph_piece_details` that every signature calls;
    `decode`: the search's `graph_search`, where another signature shares it.
    """
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    preprocessor = translator.preprocessor
    if decode is None:
        decode = graph_search(translator, sampler, jit_compile, parallel_loops, steered, model)

    def decode_bucket(ids, width, steering=None):
        source = ids.to_tensor(default_value=PAD_ID, shape=[None, width])  # (rows, width)
        if steering is None:
            ids, scores = decode(source)
        else:  # prefix (rows, longest prefix + 1): a PAD column at least, for rows without one
            prefix, constraints = steering
            ids, scores = decode(source, tf.pad(prefix.to_tensor(default_value=PAD_ID), [[0, 0], [0, 1]]), constraints)
        if n_best == 1:  # (rows, length) -> (rows, 1, length)
            ids, scores = ids[:, None], scores[:, None]
        flat = tf.reshape(tf.cast(ids, tf.int32), [-1, tf.shape(ids)[-1]])  # (rows * n_best, length)
        text = tf.reshape(preprocessor.detokenize_graph(flat, op), [-1, n_best])  # (rows, n_best)
        outputs = (text, tf.cast(scores, tf.float32))
        if details:
            found = piece_details(tf.repeat(source, n_best, axis=0), flat)  # each (rows * n_best, ...)
            outputs += tuple(tf.reshape(x, tf.concat([[-1, n_best], tf.shape(x)[1:]], 0)) for x in found)
        return outputs

    def steer(ids, owners, inputs, target_prefix, constraints):
        """`(ids, steering)`: the pieces' ids, once the request's steering
        passed its checks (`request_checks.check_steering_graph`), and each
        piece's prefix and constraint ids (`steering_graph`)."""
        prefix_ids = op.tokenize(target_prefix, target=True)  # (batch, None)
        phrase_ids = op.tokenize(tf.reshape(constraints, [-1]), target=True)  # (batch * constraints, None)
        checked = check_steering_graph(target_prefix, prefix_ids, constraints, phrase_ids, ids.row_lengths(), owners,
                                       tf.size(inputs), translator.max_extra_length, preprocessor.max_length)
        with tf.control_dependencies(checked):  # refused before any decoding
            ids = ids.with_flat_values(tf.identity(ids.flat_values))
        return ids, steering_graph(prefix_ids, phrase_ids, tf.shape(constraints)[1], owners, tf.size(inputs))

    def empty(length):
        """A bucket's outputs when no piece falls in it."""
        outputs = (tf.zeros([0, n_best], tf.string), tf.zeros([0, n_best], tf.float32))
        if details:  # lengths, links, source words, inside a word, target words
            outputs += (tf.zeros([0, n_best], tf.int32), tf.zeros([0, n_best, length], tf.int32),
                        tf.zeros([0, n_best], tf.int32), tf.zeros([0, n_best], tf.bool), tf.zeros([0, n_best], tf.int32))
        return outputs

    def translate(inputs, target_prefix=None, constraints=None):
        texts, frames, ids, pieces_of = pieces(inputs)  # (pieces, None), each piece's text (pieces,)
        owners = tf.gather(frames.owners, pieces_of)  # each piece's input
        steering = None
        if steered:
            ids, steering = steer(ids, owners, inputs, target_prefix, constraints)
        # Each piece goes to the smallest bucket that holds it, and each
        # bucket's pieces are decoded together.
        lengths = tf.cast(ids.row_lengths(), tf.int32)  # (pieces,)
        bucket = tf.searchsorted(tf.constant(preprocessor.buckets, tf.int32), lengths)  # (pieces,)
        rows = tf.dynamic_partition(tf.range(tf.size(lengths)), bucket, len(preprocessor.buckets))
        parts = []
        for width, part in zip(preprocessor.buckets, rows):
            outputs = tf.cond(
                tf.size(part) > 0,
                lambda width=width, part=part: decode_bucket(
                    tf.gather(ids, part), width, None if steering is None else [tf.gather(x, part) for x in steering]),
                lambda: empty(translator.preprocessor.max_length),
            )
            keep_cond_functional(outputs[0])  # a bucket's loop is optimized when a sentence first needs it
            parts.append(outputs)
        columns = list(zip(*parts))
        if details:  # links of every bucket padded to one length
            longest = tf.reduce_max([tf.shape(links)[-1] for links in columns[3]])
            columns[3] = [tf.pad(links, [[0, 0], [0, 0], [0, longest - tf.shape(links)[-1]]], constant_values=-1)
                          for links in columns[3]]
        stitched = [tf.dynamic_stitch(rows, column) for column in columns]  # (pieces, n_best, ...)
        text, _ = preprocessor.join_graph(stitched[0], stitched[1], pieces_of, tf.size(texts))  # (texts, n_best)
        text = preprocessor.frame_graph(text, frames)  # (batch, n_best): each input's whitespace put back
        scores = tf.math.unsorted_segment_mean(stitched[1], owners, tf.size(inputs))  # (batch, n_best)
        # An input without pieces (blank) has one empty translation, as from
        # `Translator.hypotheses`: its other ranks are the search's placeholders.
        has_piece = tf.math.unsorted_segment_sum(tf.ones_like(owners), owners, tf.size(inputs)) > 0
        scores = tf.where(has_piece[:, None] | (tf.range(n_best) == 0)[None, :], scores, NEG_INF)
        outputs = {"translations": text[:, 0], "scores": scores[:, 0]}
        if details:
            _, piece_scores, lengths, *links = stitched  # (pieces, n_best, ...)
            log_probs = piece_scores * length_penalty(lengths, translator.alpha, translator.length_penalty)
            confidences, alignments = join_details_graph(log_probs, lengths, *links, owners, tf.size(inputs), n_best)
            outputs.update(confidences=confidences[:, 0], alignments=alignments[:, 0])
        if n_best > 1:
            outputs.update(nbest_translations=text, nbest_scores=scores)
            if details:
                outputs.update(nbest_confidences=confidences, nbest_alignments=alignments)
        return outputs

    return translate


class FrozenModel:
    """`model` as a SavedModel decodes it: its output projection's
    transposed table `(d_model, vocab)` kept as a weight of its own, which
    every call reads, where the model's `init_cache` transposes the
    embedding table at every call (a copy of the whole table, which took as
    long as a few decoding steps of one sentence: benchmarks/README.md). A
    SavedModel's weights never change, so the copy stays the table's.
    Everything else is `model`'s."""

    def __init__(self, model, table):
        self._model, self.output_table = model, table

    def __getattr__(self, name):
        return getattr(self._model, name)

    def init_cache(self, memory, max_length=None):
        # The model's transposed table, unread, is pruned from the graph.
        return {**self._model.init_cache(memory, max_length), "output_projection": self.output_table}


def frozen(model):
    """`FrozenModel` of `model`, or `model` itself where its cache has no
    transposed table (an int8 table's product is its own)."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    table = model.init_cache(model.encode(tf.ones((1, 1), tf.int32)), 1).get("output_projection")
    if table is None:
        return model
    return FrozenModel(model, tf.Variable(table, trainable=False, name="output_projection_table"))


def graph_piece_details(translator):
    """The graph function `(source, ids) -> (lengths, links, source words,
    inside a word, target words)`: each hypothesis's length (its tokens,
    EOS included) and word links
    (`keras_transformer.translation.alignment.word_links`), for `source`
    `(hypotheses, width)` and `ids` `(hypotheses, length)`, each output
    `(hypotheses, ...)`. Every signature with details calls it: the
    SavedModel holds and loads its forced decoding once."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    def piece_details(source, ids):
        kinds = piece_kinds(translator.tokenizer)  # when traced: not for an export without details
        lengths = tf.reduce_sum(tf.cast(ids != PAD_ID, tf.int32), axis=1)
        _, attention = force_decode(translator.model, source, ids, ALIGNMENT_LAYER)
        return (lengths, *word_links(attention, source, ids, kinds))

    ids = tf.TensorSpec([None, None], tf.int32)
    return tf.function(piece_details, input_signature=[ids, ids], autograph=False)


def build_score_fn(translator, op):
    """The graph function `(inputs, targets) [batch] string -> dict of
    outputs`: `Translator.score`, each side tokenized whole and packed."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    def score(inputs, targets):
        source = _tokenize(op, inputs)
        target = _tokenize(op, targets, target=True)
        with tf.control_dependencies(check_score_graph(source, target, translator.preprocessor.max_length)):
            target = target.to_tensor(default_value=PAD_ID)  # (batch, length)
        log_probs = force_decode(translator.model, source.to_tensor(default_value=PAD_ID), target)  # (batch, length)
        lengths = tf.reduce_sum(tf.cast(target != PAD_ID, tf.int32), axis=1)
        totals = tf.reduce_sum(log_probs, axis=1)
        pieces = tf.where(target != PAD_ID, op.id_to_string(target), "")
        return {"scores": totals / length_penalty(lengths, translator.alpha, translator.length_penalty),
                "totals": totals, "tokens": pieces,
                "token_log_probs": log_probs}

    return score


def _tokenize(op, texts, target=False):
    """Ids of `texts` (sources, or `target`s) by the `GraphTokenizer` `op`,
    EOS appended: ragged int32 `(batch, None)`."""
    return pack_source_ragged(op.tokenize(texts, target))


def _check_graph_options(translator, n_best, jit_compile, parallel_loops, warmup_batch_sizes, version, signatures):
    """`parallel_loops` resolved (2 without XLA, 1 with); `ValueError`s name a bad argument."""
    check_bool("jit_compile", jit_compile)
    if parallel_loops is None:
        parallel_loops = 1 if jit_compile else PARALLEL_LOOPS
    check_positive("parallel_loops", parallel_loops)
    if jit_compile and parallel_loops != 1:
        raise ValueError(
            "Argument `parallel_loops` applies to the graph without XLA; with `jit_compile=True` it must be 1 "
            f"or None. Received: parallel_loops={parallel_loops!r}"
        )
    if translator.narrow_batches and not jit_compile:
        raise ValueError(
            "Argument `narrow_batches` exports only with `jit_compile=True` (without XLA each sentence leaves "
            "the batch as it finishes). Received: narrow_batches=True, jit_compile=False"
        )
    check_batch_sizes(warmup_batch_sizes, len(translator.preprocessor.buckets), name="warmup_batch_sizes",
                      num_signatures=1 + len(set(signatures)))
    if version is not None:
        check_positive("version", version)
    check_n_best(n_best, translator.beam_size)
    if translator.tokenizer is None:
        raise ValueError("Exporting needs the translator's tokenizer. Received: tokenizer=None")
    if not translator.model.built:
        raise ValueError("The model must be built (trained or called once) before export.")
    return parallel_loops


def export(model, tokenizer, export_dir, **options):
    """Writes `export_dir/<version>/`, a SavedModel that translates strings.

    Args:
        model: a trained `Transformer` (TensorFlow backend).
        tokenizer: its `SubwordTokenizer`, or the path of its SentencePiece
            `.model` file, or that file's bytes.
        export_dir: the model folder, e.g. `saved_models/tatoeba_en_fr`.
        **options: the `Translator`'s decoding options (`beam_size`,
            `alpha`, `max_extra_length`, `narrow_batches`, `long_inputs`,
            `buckets`, with its defaults) and the graph's
            (`write_saved_model`: `version`, `n_best`, `jit_compile`,
            `parallel_loops`, `warmup_batch_sizes`, `metadata`).

    Returns:
        The version folder's path.
    """
    if isinstance(tokenizer, (bytes, bytearray)):
        tokenizer = SubwordTokenizer(tokenizer)
    elif not isinstance(tokenizer, SubwordTokenizer):
        tokenizer = SubwordTokenizer.load(tokenizer)
    decoding = {name: options.pop(name) for name in DECODING_OPTIONS if name in options}  # the rest: the graph's
    return write_saved_model(Translator(model, tokenizer, **decoding), export_dir, **options)


def write_saved_model(translator, export_dir, *, version=None, n_best=1, jit_compile=False, parallel_loops=None,
                      warmup_batch_sizes=(1,), metadata=None, signatures=()):
    """Writes `export_dir/<version>/`, a SavedModel that translates as `translator` does.

    Args:
        translator: a `Translator` (TensorFlow backend), whose decoding
            options (beam size, length penalty, output length, long inputs,
            buckets, narrowing batches) the graph takes.
        export_dir: the model folder, e.g. `saved_models/tatoeba_en_fr`; the
            SavedModel goes to a numbered version folder inside it, as TF
            Serving expects.
        version: int; defaults to one more than the highest version there.
        n_best: int; also return the `n_best` best translations.
        jit_compile: bool. Compile each bucket's beam search with XLA, once
            per number of rows (rounded up to a power of two) the first time
            it comes: faster translation after seconds of compiling per new
            shape. TF Serving runs such a SavedModel only with
            `--xla_cpu_compilation_enabled=true` on CPUs.
        parallel_loops: int; without `jit_compile`, a bucket's sentences
            are split into this many parts, each decoded by a loop of its
            own, which TensorFlow's inter-op threads run side by side
            (about one per core the server gives the model). Defaults to 2
            (1 with `jit_compile`, where XLA's threads split the work).
        warmup_batch_sizes: TF Serving's warm-up requests, written to
            `assets.extra/tf_serving_warmup_requests`: one per bucket and
            batch size (`keras_transformer.export.warmup`). TF Serving and
            `keras-transformer serve` replay them at load. `()` writes none.
        metadata: optional dict added to `assets.extra/metadata.json`.
        signatures: the signatures besides `serving_default`, of
            `SIGNATURES`; none by default. Each is another graph to trace
            at export.

    Returns:
        The version folder's path.
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "Exporting a SavedModel needs the TensorFlow backend (Keras "
            "weights are backend-independent: load them with "
            "KERAS_BACKEND=tensorflow and export there). Received: "
            f"backend {keras.backend.backend()!r}"
        )
    if isinstance(signatures, str) or not set(signatures) <= set(SIGNATURES):
        raise ValueError(f"Argument `signatures` must hold names of {SIGNATURES}. Received: signatures={signatures!r}")
    parallel_loops = _check_graph_options(translator, n_best, jit_compile, parallel_loops, warmup_batch_sizes, version,
                                          signatures)
    if "steer" in signatures:  # the `steer` signature takes constraints
        check_constraints_searchable(translator.beam_size)
    target = os.path.join(export_dir, str(version or next_version(export_dir)))
    if os.path.exists(target):
        raise FileExistsError(f"{target!r} already exists; pass another `version`")
    os.makedirs(export_dir, exist_ok=True)
    remove_stale_staging(export_dir)
    # Built beside its final place, then renamed: a version appears whole or
    # not at all (TF Serving ignores the non-numeric staging folder).
    with staging_folder(export_dir) as staging:
        saved = os.path.join(staging, "saved_model")
        _write_graph(translator, saved, n_best, jit_compile, parallel_loops, signatures)
        settings = dict(
            **{**translator.sampler.get_config(), "stop": translator.stop},
            max_extra_length=translator.max_extra_length, n_best=n_best,
            source_budget=translator.preprocessor.source_budget, long_inputs=translator.preprocessor.long_inputs,
            split_sentences=translator.preprocessor.split_sentences,
            buckets=translator.preprocessor.buckets, bos_id=BOS_ID, eos_id=EOS_ID, jit_compile=jit_compile,
            parallel_loops=parallel_loops, narrow_batches=translator.narrow_batches,
            signatures=["serving_default", *[name for name in SIGNATURES if name in signatures]],
            model_config=translator.model.get_config(), weights=[v.path for v in translator.model.weights],
            **(metadata or {}),
        )
        with open(os.path.join(saved, "assets.extra", "metadata.json"), "w") as f:
            json.dump(settings, f, indent=2, default=str)
        if warmup_batch_sizes:
            write_warmup_requests(saved, list(warmup_batch_sizes))
        os.replace(saved, target)
    return target


STAGING = ".export-"  # the prefix of an export's staging folder, and of its lock file


@contextlib.contextmanager
def staging_folder(export_dir):
    """A new staging folder in `export_dir`, removed at the end. Its lock
    (`locks.holding`), held meanwhile, tells a later export whether it is
    the folder of an export that was killed, to remove."""
    staging = os.path.join(export_dir, STAGING + secrets.token_hex(8))
    with locks.holding(staging + ".lock", f"Export folder {staging!r}"):
        os.mkdir(staging)
        try:
            yield staging
        finally:
            shutil.rmtree(staging, ignore_errors=True)


def remove_stale_staging(export_dir):
    """Removes what exports into `export_dir` that were killed left there:
    the staging folders whose lock no process holds."""
    for name in os.listdir(export_dir):
        if not name.startswith(STAGING):
            continue
        staging = os.path.join(export_dir, name.removesuffix(".lock"))
        if not locks.is_held(staging + ".lock"):
            shutil.rmtree(staging, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.remove(staging + ".lock")


def _write_graph(translator, path, n_best, jit_compile, parallel_loops, signatures):
    """Traces the signatures into a SavedModel at `path`, with the
    tokenizer's model file in `assets/` (for tools such as the
    `sentencepiece` package; the graph's op carries the same bytes), an
    imported model's target model beside it, and an empty `assets.extra/`."""
    import tensorflow as tf  # not on the import path under JAX or PyTorch

    op = translator.preprocessor.graph_tokenizer()  # the SentencePiece ops the graph runs and the SavedModel tracks
    search = translator.sampler
    if n_best > 1:
        search = BeamSampler(translator.beam_size, translator.alpha, num_return=n_best,
                             continues_word=translator.continues_word, stop=translator.stop,
                             length_penalty=translator.length_penalty)
    # The graph functions every signature calls (each traced when first called).
    model = frozen(translator.model)
    graph = dict(pieces=graph_pieces(translator, op), piece_details=graph_piece_details(translator),
                 jit_compile=jit_compile, parallel_loops=parallel_loops, model=model)
    beam = graph_search(translator, search, jit_compile, parallel_loops, model=model)
    functions = {"serving_default": build_translate_fn(translator, op, search, n_best=n_best, decode=beam, **graph)}
    if "details" in signatures:
        functions["details"] = build_translate_fn(translator, op, search, n_best=n_best, details=True, decode=beam,
                                                  **graph)
    if "sample" in signatures:
        def sample(inputs, seed, temperature, top_k, top_p):
            sampler = RandomSampler.from_tensors(top_k, top_p, temperature, seed, alpha=translator.alpha,
                                                 length_penalty=translator.length_penalty)
            return build_translate_fn(translator, op, sampler, details=True, **graph)(inputs)

        functions["sample"] = sample
    if "score" in signatures:
        functions["score"] = build_score_fn(translator, op)
    if "steer" in signatures:
        functions["steer"] = build_translate_fn(translator, op, search, n_best=n_best, details=True, steered=True,
                                                **graph)
    specs = {name: [tf.TensorSpec([None] * rank, dtype, name=input_name)
                    for input_name, (dtype, rank) in SIGNATURE_INPUTS[name].items()] for name in functions}
    # Each traced once, here. Not `keras.export.ExportArchive`: it traces its
    # endpoint to find the variables, then `tf.saved_model.save` traces the
    # `tf.function` again in its save context (another tracing key), which
    # doubled an export's time. A concrete function is saved as traced.
    concrete = {name: tf.function(fn, autograph=False).get_concrete_function(*specs[name])
                for name, fn in functions.items()}
    resources = tf.Module()
    resources.tokenizer = op.source  # the SentencePiece ops' model resources
    if op.target is not op.source:
        resources.target_tokenizer = op.target
    # The model's weights in its order, which `read_translator_parts` restores by
    # position (metadata.json names them), then anything else the functions
    # capture; each once.
    captured = {id(w.value): w.value for w in translator.model.weights}
    captured.update({id(v): v for c in concrete.values() for v in c.variables})
    resources.weights = list(captured.values())
    tf.saved_model.save(resources, path, signatures=concrete)
    translator.tokenizer.save(os.path.join(path, "assets"))
    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
