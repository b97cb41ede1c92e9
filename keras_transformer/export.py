"""Export a trained model as a SavedModel that translates strings.

The SavedModel's `serving_default` signature takes `inputs: tf.string
[batch]` and returns `translations: tf.string [batch]` and `scores:
tf.float32 [batch]` (plus `nbest_translations` and `nbest_scores` of shape
`[batch, n_best]` when `n_best > 1`). Tokenization (tensorflow-text's
SentencePiece op; the tokenizer model is also in the SavedModel's assets), beam
search (a `tf.while_loop` from `keras.ops.while_loop`) and detokenization all
run inside the graph, built from stock TensorFlow and tensorflow-text ops, so
TF Serving or plain `tf.saved_model.load` serve it without this package.

Documented edge cases, per sentence (they never fail the batch):
- an empty (or all-whitespace) input gives an empty translation, score 0;
- an input longer than the model allows is truncated to its first
  `max_input_length - 1` subword tokens (EOS takes the last place).

Each source is padded to the smallest of a few fixed lengths (`buckets`)
that fits it, and the sentences of each bucket are decoded together in
that bucket's own branch of the graph, so shapes are static inside the
loop, a short sentence never pays for a long one in the same request, and
a sentence is padded to the same length whatever else the request holds.
Within a bucket, a sentence leaves the batch at the step its beam search is
done (`beam_search(drop_finished=True)`), and the bucket's sentences are
split between `parallel_loops` loops (2 by default) that TensorFlow runs
side by side. With `jit_compile=True` (XLA) the batch keeps its rows, or,
with `narrow_batches=True`, narrows to its half and then its quarter as its
sentences finish.
"""

import json
import os
import shutil
import tempfile

import keras

from keras_transformer.data.tokenizer import detokenize_ids
from keras_transformer.decoding import beam_search
from keras_transformer.decoding.common import model_max_length
from keras_transformer.serving.warmup import check_batch_sizes, write_warmup_requests
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID, pack_source_ragged, source_capacity
from keras_transformer.validation import check_non_negative_int, check_positive

DEFAULT_BUCKETS = (16, 32, 64, 128, 256)


def _tokenizer_model_bytes(tokenizer):
    """The serialized SentencePiece model of a tokenizer, path or bytes."""
    if isinstance(tokenizer, bytes):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        if not os.path.isfile(tokenizer):
            raise FileNotFoundError(f"No SentencePiece model file at {os.fspath(tokenizer)!r}")
        with open(tokenizer, "rb") as f:
            return f.read()
    proto = getattr(tokenizer, "model_proto", None)
    if proto is None:
        raise ValueError(
            "Argument `tokenizer` must be a SubwordTokenizer, the path of a "
            f"SentencePiece .model file or its bytes. Received: {type(tokenizer).__name__}"
        )
    return proto


def next_version(export_dir):
    """1 + the highest numbered version folder in `export_dir` (or 1)."""
    if not os.path.isdir(export_dir):
        return 1
    versions = [int(d) for d in os.listdir(export_dir) if d.isdigit()]
    return max(versions, default=0) + 1


def _keep_branches_lazy(output):
    """Marks the `tf.cond` that computes `output` to stay a functional `If`.

    TensorFlow lowers every `tf.cond` of a function into the function's own
    graph (Switch/Merge), so the first call of the SavedModel optimizes
    every bucket's beam search, each with its loop segments, whether the
    call needs it or not. Unlowered, a bucket's branch is a function of its
    own, optimized the first time a sentence of that bucket comes. With
    buckets 16/32/64/206 of the zoo model, first call 16 s lowered, 5.6 s
    lazy (benchmarks/README.md). `_lower_using_switch_merge` is the
    attribute TensorFlow's cond_v2 sets itself (`Operation._set_attr` is
    private API); stock TensorFlow runs either form (tests/export loads the
    SavedModel with only tensorflow and tensorflow-text).
    """
    from tensorflow.core.framework import attr_value_pb2

    op = output.op
    while op.type not in ("If", "StatelessIf"):
        op = op.inputs[0].op
    op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))


def build_translate_fn(model, tokenizer_path, beam_size, alpha, max_extra_length, n_best, max_input_length, buckets,
                       jit_compile=False, parallel_loops=1, narrow_batches=False):
    """The graph function `inputs [batch] string -> dict of outputs`."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    buckets = sorted({b for b in buckets if b < max_input_length} | {max_input_length})

    def search(source, drop_finished):
        return beam_search(
            model, source, beam_size=beam_size, alpha=alpha,
            max_extra_length=max_extra_length, num_return=n_best, drop_finished=drop_finished,
        )

    if jit_compile:  # under XLA shapes are static: finished sentences stay in the batch, or it narrows
        drop = "halves" if narrow_batches else False
        compiled_search = tf.function(lambda source: search(source, drop), jit_compile=True, autograph=False)

    def parallel_search(source):
        """`search` over `parallel_loops` parts of the rows, each its own loop.

        The parts do not depend on one another, so TensorFlow's inter-op
        threads run their loops side by side, where one loop's small ops,
        each waiting on the last, leave a second core mostly idle
        (benchmarks/README.md). Each loop is a copy of the beam search in
        the graph: a nested `tf.function` would keep one, but it ran single
        sentences 7-12 ms slower. A part may be empty (fewer rows than parts).
        """
        rows = tf.shape(source)[0]
        bounds = [rows * i // parallel_loops for i in range(parallel_loops + 1)]
        parts = [search(source[start:end], drop_finished=True) for start, end in zip(bounds, bounds[1:])]
        length = tf.reduce_max([tf.shape(ids)[-1] for ids, _ in parts])
        # Parts stop at their own lengths: PAD the shorter ones' ids.
        ids = [
            tf.pad(ids, [[0, 0]] * (ids.shape.rank - 1) + [[0, length - tf.shape(ids)[-1]]], constant_values=PAD_ID)
            for ids, _ in parts
        ]
        return tf.concat(ids, 0), tf.concat([scores for _, scores in parts], 0)

    def decode_bucket(tokens, size, tokenizer):
        source = tokens.to_tensor(default_value=0, shape=[None, size])  # (batch, size)
        if jit_compile:
            # XLA compiles once per shape: the rows go up to a power of two,
            # filled with copies of the last sentence (they stop with it).
            rows = tf.shape(source)[0]
            powers = tf.constant([2**i for i in range(31)], tf.int32)
            padded = tf.gather(powers, tf.searchsorted(powers, rows[None])[0])  # the smallest power >= rows
            source = tf.gather(source, tf.minimum(tf.range(padded), rows - 1))
            ids, scores = compiled_search(source)
            ids, scores = ids[:rows], scores[:rows]
        else:  # done sentences leave the loop
            ids, scores = parallel_search(source)
        if n_best == 1:  # (batch, length) -> (batch, 1, length)
            ids, scores = ids[:, None], scores[:, None]
        flat = tf.reshape(tf.cast(ids, tf.int32), [-1, tf.shape(ids)[-1]])  # (batch * n_best, length)
        text = tf.reshape(detokenize_ids(tokenizer, flat), [-1, n_best])  # (batch, n_best)
        return text, tf.cast(scores, tf.float32)

    # The op takes the model as an attribute, so its bytes also live in the
    # graph; the same file is in the SavedModel's assets for other tools.
    with open(tokenizer_path, "rb") as f:
        tokenizer = tf_text.SentencepieceTokenizer(model=f.read())

    def translate(inputs):
        tokens = tokenizer.tokenize(inputs)  # ragged (batch, None) int32
        tokens = tf.cast(tokens[:, : source_capacity(max_input_length)], tf.int32)
        # Empty as Python's `str.isspace` has it (RE2's \s lacks \v, \x1c-\x1f, \x85).
        blank = tf.strings.regex_full_match(inputs, r"[\s\v\x{1c}-\x{1f}\x{85}\pZ]*")
        empty = (tokens.row_lengths() == 0) | blank  # (batch,)
        tokens = pack_source_ragged(tokens)
        # Each sentence goes to the smallest bucket that fits it, and each
        # bucket's sentences are decoded together: one long sentence does not
        # pad, nor lengthen the decoding of, the short ones. Blank inputs
        # (the last partition) are not decoded at all.
        bucket = tf.searchsorted(tf.constant(buckets, tf.int64), tokens.row_lengths())  # (batch,)
        bucket = tf.where(empty, len(buckets), tf.cast(bucket, tf.int32))
        rows = tf.dynamic_partition(tf.range(tf.size(inputs)), bucket, len(buckets) + 1)
        texts, scores = [], []
        for size, part in zip(buckets, rows):
            text, score = tf.cond(
                tf.size(part) > 0,
                lambda size=size, part=part: decode_bucket(tf.gather(tokens, part), size, tokenizer),
                lambda: (tf.zeros([0, n_best], tf.string), tf.zeros([0, n_best], tf.float32)),
            )
            _keep_branches_lazy(text)
            texts.append(text)
            scores.append(score)
        texts.append(tf.fill([tf.size(rows[-1]), n_best], ""))  # blank inputs: "", score 0
        scores.append(tf.zeros([tf.size(rows[-1]), n_best], tf.float32))
        text, scores = tf.dynamic_stitch(rows, texts), tf.dynamic_stitch(rows, scores)  # (batch, n_best)
        outputs = {"translations": text[:, 0], "scores": scores[:, 0]}
        if n_best > 1:
            outputs.update(nbest_translations=text, nbest_scores=scores)
        return outputs

    return translate, tokenizer, buckets


def export(
    model,
    tokenizer,
    export_dir,
    *,
    version=None,
    beam_size=4,
    alpha=0.6,
    max_extra_length=50,
    n_best=1,
    max_input_length=None,
    buckets=DEFAULT_BUCKETS,
    metadata=None,
    jit_compile=False,
    parallel_loops=None,
    narrow_batches=False,
    warmup_batch_sizes=(1,),
):
    """Writes `export_dir/<version>/`, a SavedModel that translates strings.

    Args:
        model: a trained `Transformer` (TensorFlow backend).
        tokenizer: its `SubwordTokenizer`, or the path of the SentencePiece
            `.model` file, or that file's bytes.
        export_dir: the model folder, e.g. `saved_models/tatoeba_en_fr`; the
            SavedModel goes to a numbered version folder inside it, as TF
            Serving expects.
        version: int; defaults to one more than the highest version there.
        beam_size, alpha, max_extra_length: beam search settings (the
            paper's 4, 0.6 and input length + 50 by default).
        n_best: int; also return the `n_best` best translations.
        max_input_length: source tokens kept (EOS included); defaults to
            the model's `max_length` less `max_extra_length`.
        buckets: source lengths the graph pads to.
        metadata: optional dict written as `assets.extra/metadata.json`.
        jit_compile: bool. Compile each bucket's beam search with XLA, once
            per number of rows (rounded up to a power of two) the first time
            it comes: faster translation after a few seconds of compiling
            per new shape. TF Serving runs such a SavedModel only with
            `--xla_cpu_compilation_enabled=true` on CPUs.
        parallel_loops: int; without `jit_compile`, a bucket's sentences
            are split into this many parts, each decoded by a loop of its
            own, which TensorFlow's inter-op threads run side by side
            (about one per core the server gives the model). Each loop is a
            copy of the beam search in the graph. Defaults to 2 (1 with
            `jit_compile`, where XLA's threads split the work instead).
        narrow_batches: bool; with `jit_compile`, a bucket's batch narrows
            to its half, then its quarter, as its sentences finish
            (`beam_search(drop_finished="halves")`; without XLA each
            sentence leaves the batch as it finishes anyway). Each batch
            shape then compiles about twice as long.
        warmup_batch_sizes: TF Serving's warm-up requests, written to
            `assets.extra/tf_serving_warmup_requests`: one per bucket and
            batch size (`keras_transformer.serving.warmup`). TF Serving and
            `keras-transformer serve` replay them at load, so that the
            first requests do not pay for optimizing or compiling each
            bucket. `()` writes none.

    Returns:
        The version folder's path.

    Example:

    >>> path = export(model, tokenizer, "saved_models/tatoeba_en_fr")
    >>> reloaded = tf.saved_model.load(path)
    >>> reloaded.signatures["serving_default"](inputs=tf.constant(["Hi."]))
    """
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            "Exporting a SavedModel needs the TensorFlow backend (Keras "
            "weights are backend-independent: load them with "
            "KERAS_BACKEND=tensorflow and export there). Received: "
            f"backend {keras.backend.backend()!r}"
        )
    import tensorflow as tf

    check_positive("beam_size", beam_size)
    check_positive("n_best", n_best)
    if not isinstance(jit_compile, bool):
        raise ValueError(f"Argument `jit_compile` must be True or False. Received: jit_compile={jit_compile!r}")
    check_non_negative_int("max_extra_length", max_extra_length)
    if not isinstance(buckets, (list, tuple)) or not buckets or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 2 for b in buckets
    ):
        raise ValueError(f"Argument `buckets` must be a list or tuple of integers >= 2. Received: buckets={buckets!r}")
    if parallel_loops is None:
        parallel_loops = 1 if jit_compile else 2
    check_positive("parallel_loops", parallel_loops)
    if jit_compile and parallel_loops != 1:
        raise ValueError(
            "Argument `parallel_loops` applies to the graph without XLA; with `jit_compile=True` it must be 1 "
            f"or None. Received: parallel_loops={parallel_loops!r}"
        )
    if not isinstance(narrow_batches, bool) or (narrow_batches and not jit_compile):
        raise ValueError(
            "Argument `narrow_batches` must be True or False, and True only with `jit_compile=True` (without "
            "XLA each sentence leaves the batch as it finishes). Received: "
            f"narrow_batches={narrow_batches!r}, jit_compile={jit_compile!r}"
        )
    check_batch_sizes(warmup_batch_sizes, len(buckets) + 1, name="warmup_batch_sizes")  # + max_input_length's
    if version is not None:
        check_positive("version", version)
    if n_best > beam_size:
        raise ValueError(f"Argument `n_best` must be at most `beam_size`={beam_size}. Received: n_best={n_best}")
    if not model.built:
        raise ValueError("The model must be built (trained or called once) before export.")
    cap = model_max_length(model)
    if max_input_length is None:
        max_input_length = max(cap - max_extra_length, 2)
    if isinstance(max_input_length, bool) or not isinstance(max_input_length, int) or not 2 <= max_input_length <= cap:
        raise ValueError(
            f"Argument `max_input_length` must be None or an integer in [2, {cap}] (the model's "
            f"max_length). Received: max_input_length={max_input_length!r}"
        )
    if version is None:
        version = next_version(export_dir)
    target = os.path.join(export_dir, str(version))
    if os.path.exists(target):
        raise FileExistsError(f"{target!r} already exists; pass another `version`")

    os.makedirs(export_dir, exist_ok=True)
    # Built beside its final place, then renamed: a version appears whole or
    # not at all (TF Serving ignores the non-numeric staging folder).
    staging = tempfile.mkdtemp(prefix=".export-", dir=export_dir)
    try:
        tokenizer_path = os.path.join(staging, "tokenizer.model")
        with open(tokenizer_path, "wb") as f:
            f.write(_tokenizer_model_bytes(tokenizer))
        translate, in_graph_tokenizer, used_buckets = build_translate_fn(
            model, tokenizer_path, beam_size, alpha, max_extra_length, n_best, max_input_length, buckets,
            jit_compile=jit_compile, parallel_loops=parallel_loops, narrow_batches=narrow_batches,
        )
        resources = tf.Module()
        resources.tokenizer = in_graph_tokenizer
        archive = keras.export.ExportArchive()
        # Not `archive.track(model)`: the endpoint's own variables are saved
        # anyway, and tracking the model's Keras variables as well writes
        # every weight twice (Keras 3.15: `variables` beside `_all_variables`).
        archive.track(resources)  # the tokenizer's op resource
        archive.add_endpoint(
            "serving_default", translate, input_signature=[tf.TensorSpec([None], tf.string, name="inputs")]
        )
        saved = os.path.join(staging, "saved_model")
        archive.write_out(saved, verbose=False)
        settings = dict(
            beam_size=beam_size, alpha=alpha, max_extra_length=max_extra_length, n_best=n_best,
            max_input_length=max_input_length, buckets=used_buckets, bos_id=BOS_ID, eos_id=EOS_ID,
            jit_compile=bool(jit_compile), parallel_loops=parallel_loops, narrow_batches=narrow_batches,
            model_config=model.get_config(), **(metadata or {}),
        )
        # The tokenizer model travels in assets/ (for tools such as the
        # `sentencepiece` package); the graph's op carries the same bytes.
        os.makedirs(os.path.join(saved, "assets"), exist_ok=True)
        shutil.copy(tokenizer_path, os.path.join(saved, "assets", "tokenizer.model"))
        os.makedirs(os.path.join(saved, "assets.extra"), exist_ok=True)
        with open(os.path.join(saved, "assets.extra", "metadata.json"), "w") as f:
            json.dump(settings, f, indent=2, default=str)
        if warmup_batch_sizes:
            write_warmup_requests(saved, list(warmup_batch_sizes))
        os.replace(saved, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
