"""TF Serving's warm-up requests for an exported SavedModel.

TF Serving replays the requests in `assets.extra/tf_serving_warmup_requests`
(a TFRecord file of `PredictionLog` protos) when it loads a model, before
the model takes traffic (https://www.tensorflow.org/tfx/serving/saved_model_warmup);
`keras-transformer serve` does the same. Without them the first request that
reaches each signature and bucket pays one-off costs: TensorFlow optimizes
a signature's graph the first time it runs, and a bucket's branch of it the
first time one of its sentences comes; a `jit_compile` SavedModel compiles
each bucket's search once per number of rows.

`export` writes one request per signature, bucket and warm-up batch size.
Its input is one word of the model's own vocabulary, repeated to fill the
bucket, so the requests fit any language pair; the `steer` signature's
request forces that word as a target prefix and a constraint, `score`'s
scores the input as its own translation, and `sample`'s samples with the
defaults. The protos come from the `tensorflow-serving-api` package (TF
Serving's own Python API).

Example:

>>> from keras_transformer.export.warmup import write_warmup_requests, read_warmup_requests
>>> write_warmup_requests("saved_models/tatoeba_en_fr/1", batch_sizes=(1, 8))
>>> [(signature, len(inputs["inputs"])) for signature, inputs in read_warmup_requests("saved_models/tatoeba_en_fr/1")][:2]
[('serving_default', 1), ('serving_default', 8)]
"""

import json
import os
import time

from keras_transformer.compat.saved_model import saved_model_signature_defs
from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH, SAMPLING
from keras_transformer.tokens import source_capacity
from keras_transformer.translation.request_checks import leaves_room, steering_room

WARMUP_FILE = "tf_serving_warmup_requests"  # in assets.extra/, the name TF Serving reads
MAX_WARMUP_REQUESTS = 1000  # TF Serving's limit
SIGNATURE = "serving_default"
INPUT_KEY = "inputs"


def warmup_path(saved_model_dir):
    return os.path.join(saved_model_dir, "assets.extra", WARMUP_FILE)


def _repeatable_word(processor):
    """`(word, pieces per word)`: the word of the vocabulary that costs the
    fewest pieces when repeated (one, for most vocabularies)."""
    best = None
    for i in range(processor.get_piece_size()):
        piece = processor.id_to_piece(i)
        word = piece[1:]  # "▁word": a piece that starts a word
        if not piece.startswith("\u2581") or not word.isalpha():
            continue
        pieces, remainder = divmod(len(processor.encode(" ".join([word] * 4))), 4)
        if remainder == 0 and pieces and (best is None or pieces < best[1]):
            best = (word, pieces)
            if pieces == 1:
                break
    if best is None:
        raise ValueError("The tokenizer has no piece that starts a word of letters: no warm-up sentence can be made.")
    return best


def warmup_sentences(tokenizer_proto, buckets):
    """One sentence per bucket that the SavedModel pads to that bucket.

    A source of n pieces takes n + 1 tokens with its EOS and goes to the
    smallest bucket that holds them.

    Args:
        tokenizer_proto: the SentencePiece model's bytes.
        buckets: the SavedModel's buckets (its metadata's `buckets`).

    Raises:
        ValueError: if a bucket cannot be filled with whole words.
    """
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_proto=tokenizer_proto)
    word, per_word = _repeatable_word(processor)
    sentences, previous = [], 0
    for bucket in sorted(buckets):
        words = source_capacity(bucket) // per_word
        length = words * per_word + 1  # + EOS
        if words < 1 or length <= previous:
            raise ValueError(
                f"No sentence of whole words fills bucket {bucket} (the word {word!r} takes {per_word} pieces). "
                f"Received: buckets={list(buckets)!r}"
            )
        sentences.append(" ".join([word] * words))
        previous = bucket
    return sentences


def check_batch_sizes(batch_sizes, num_buckets, name="batch_sizes", num_signatures=1):
    """Raises ValueError unless `batch_sizes` is a list or tuple of integers >= 1
    (empty: no requests) making at most TF Serving's 1,000 requests, one per
    signature, bucket and batch size."""
    if not isinstance(batch_sizes, (list, tuple)) or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batch_sizes
    ):
        raise ValueError(
            f"Argument `{name}` must be a list or tuple of integers >= 1 (empty for none). "
            f"Received: {name}={batch_sizes!r}"
        )
    count = len(batch_sizes) * num_buckets * num_signatures
    if count > MAX_WARMUP_REQUESTS:
        raise ValueError(
            f"TF Serving replays at most {MAX_WARMUP_REQUESTS} warm-up requests: {num_signatures} signatures x "
            f"{num_buckets} buckets x {len(batch_sizes)} batch sizes make {count}. Received: {name}={batch_sizes!r}"
        )




def warmup_inputs(specs, sentence, word, batch_size, room):
    """One warm-up request's inputs, `{input: (values, dtype)}`, for a
    signature whose inputs are `specs`, `{input: dtype}`: `batch_size`
    copies of `sentence`; `steer` forces `word` as its prefix, and as a
    constraint too, while they leave its translation room (`room`:
    `(prefix_fits, both_fit)`); `score` scores the sentence as its own
    translation."""
    prefix_fits, both_fit = room
    values = {"inputs": [sentence] * batch_size, "targets": [sentence] * batch_size,
              "target_prefix": [word if prefix_fits else ""] * batch_size,
              "constraints": [[word if both_fit else ""]] * batch_size, **SAMPLING}  # `sample`: the defaults
    unknown = sorted(set(specs) - set(values))
    if unknown:
        raise ValueError(f"No warm-up value for the input {unknown[0]!r}: not a signature this package exports. "
                         f"Received: inputs {sorted(specs)}")
    return {name: (values[name], dtype) for name, dtype in specs.items()}


def write_warmup_requests(saved_model_dir, batch_sizes=(1,)):
    """Writes `assets.extra/tf_serving_warmup_requests` into an exported SavedModel.

    Works on any SavedModel written by `keras_transformer.export.export`
    (it reads the signatures, buckets and lengths from
    `assets.extra/metadata.json`, each signature's inputs from
    `saved_model.pb` and the tokenizer from `assets/tokenizer.model`), so
    older exports can be given one too.

    Args:
        saved_model_dir: one version folder (`saved_models/<name>/<version>`).
        batch_sizes: the sentences per request; one request per signature,
            bucket and batch size. A `jit_compile` SavedModel compiles per
            number of rows rounded up to a power of two: list those its
            clients send.

    Returns:
        The file's path.
    """
    import sentencepiece as spm
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_log_pb2


    metadata_file = os.path.join(saved_model_dir, "assets.extra", "metadata.json")
    tokenizer_file = os.path.join(saved_model_dir, "assets", "tokenizer.model")
    for path in (metadata_file, tokenizer_file):
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path!r} is missing: warm-up requests need a SavedModel written by "
                f"keras_transformer.export. Received: saved_model_dir={saved_model_dir!r}"
            )
    with open(metadata_file) as f:
        metadata = json.load(f)
    buckets, signatures = metadata["buckets"], metadata.get("signatures", [SIGNATURE])
    check_batch_sizes(batch_sizes, len(buckets), num_signatures=len(signatures))
    with open(tokenizer_file, "rb") as f:
        proto = f.read()
    sentences = warmup_sentences(proto, buckets)
    word, per_word = _repeatable_word(spm.SentencePieceProcessor(model_proto=proto))
    max_length = metadata.get("model_config", {}).get("max_length", max(buckets))
    max_extra_length = metadata.get("max_extra_length", MAX_EXTRA_LENGTH)
    defs = saved_model_signature_defs(saved_model_dir)  # each signature's inputs, as the SavedModel has them
    missing = sorted(set(signatures) - set(defs))
    if missing:
        raise ValueError(f"The SavedModel at {saved_model_dir!r} has no signature {missing[0]!r}, which its "
                         f"metadata.json lists. Received: signatures {sorted(defs)}")
    path = warmup_path(saved_model_dir)
    with tf.io.TFRecordWriter(path) as writer:
        for signature in signatures:
            specs = {name: tf.as_dtype(info.dtype) for name, info in defs[signature].inputs.items()}
            for sentence in sentences:
                room = steering_room(len(sentence.split()) * per_word + 1, max_extra_length, max_length)
                fits = (leaves_room(per_word, room), leaves_room(2 * per_word, room))
                for size in batch_sizes:
                    request = predict_pb2.PredictRequest()
                    request.model_spec.signature_name = signature
                    for name, (values, dtype) in warmup_inputs(specs, sentence, word, size, fits).items():
                        request.inputs[name].CopyFrom(tf.make_tensor_proto(values, dtype=dtype))
                    log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                    writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir):
    """Each warm-up request as `(signature name, {input: NumPy array})`; [] without a file.

    Raises:
        OSError: if the file is not a TFRecord file of predict requests
            (TF Serving would refuse to load it).
    """
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = warmup_path(saved_model_dir)
    if not os.path.exists(path):
        return []
    requests = []
    try:
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            log = prediction_log_pb2.PredictionLog.FromString(record)
            request = log.predict_log.request
            if log.WhichOneof("log_type") != "predict_log" or not request.inputs:
                raise ValueError("not a predict request with inputs")
            inputs = {name: tf.make_ndarray(tensor) for name, tensor in request.inputs.items()}
            requests.append((request.model_spec.signature_name or SIGNATURE, inputs))
    except Exception as error:  # tf.errors.DataLossError, protobuf's DecodeError, ...
        raise OSError(f"Cannot read the warm-up requests at {path!r}: {error}") from error
    if len(requests) > MAX_WARMUP_REQUESTS:
        raise OSError(
            f"{path!r} holds {len(requests)} warm-up requests; TF Serving replays at most {MAX_WARMUP_REQUESTS}"
        )
    return requests


def replay_warmup_requests(call, saved_model_dir):
    """Runs each warm-up request through `call(signature name, inputs)`, as
    TF Serving calls the signature it names
    (`SavedModelPredictor.call`); returns `(requests, seconds)`."""
    requests = read_warmup_requests(saved_model_dir)
    start = time.perf_counter()
    for signature, inputs in requests:
        try:
            call(signature, inputs)
        except Exception as error:  # as TF Serving, which then fails to load the model
            raise OSError(f"The warm-up request for the signature {signature!r} at {warmup_path(saved_model_dir)!r} "
                          f"failed: {error}") from error
    return len(requests), time.perf_counter() - start
