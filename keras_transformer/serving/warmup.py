"""TF Serving's warm-up requests for an exported SavedModel.

TF Serving replays the requests in `assets.extra/tf_serving_warmup_requests`
(a TFRecord file of `PredictionLog` protos) when it loads a model, before
the model takes traffic (https://www.tensorflow.org/tfx/serving/saved_model_warmup);
`keras-transformer serve` does the same. Without them the first request that
reaches each bucket pays one-off costs: TensorFlow optimizes a bucket's
branch of the graph the first time one of its sentences comes, and a
`jit_compile` SavedModel compiles each bucket's beam search once per number
of rows.

`export` writes one request per bucket and warm-up batch size. Its input is
one word of the model's own vocabulary, repeated to fill the bucket, so the
requests fit any language pair. The protos come from the
`tensorflow-serving-api` package (TF Serving's own Python API).

Example:

>>> from keras_transformer.serving.warmup import write_warmup_requests, read_warmup_requests
>>> write_warmup_requests("saved_models/tatoeba_en_fr/1", batch_sizes=(1, 8))
>>> [len(inputs) for inputs in read_warmup_requests("saved_models/tatoeba_en_fr/1")]
[1, 8, 1, 8, 1, 8, 1, 8]
"""

import json
import os
import time

from keras_transformer.tokens import source_capacity

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


def check_batch_sizes(batch_sizes, num_buckets, name="batch_sizes"):
    """Raises ValueError unless `batch_sizes` is a list or tuple of integers >= 1
    (empty: no requests) making at most TF Serving's 1,000 requests."""
    if not isinstance(batch_sizes, (list, tuple)) or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in batch_sizes
    ):
        raise ValueError(
            f"Argument `{name}` must be a list or tuple of integers >= 1 (empty for none). "
            f"Received: {name}={batch_sizes!r}"
        )
    if len(batch_sizes) * num_buckets > MAX_WARMUP_REQUESTS:
        raise ValueError(
            f"TF Serving replays at most {MAX_WARMUP_REQUESTS} warm-up requests: {num_buckets} buckets x "
            f"{len(batch_sizes)} batch sizes make {len(batch_sizes) * num_buckets}. Received: {name}={batch_sizes!r}"
        )


def write_warmup_requests(saved_model_dir, batch_sizes=(1,)):
    """Writes `assets.extra/tf_serving_warmup_requests` into an exported SavedModel.

    Works on any SavedModel written by `keras_transformer.export.export`
    (it reads the buckets from `assets.extra/metadata.json` and the
    tokenizer from `assets/tokenizer.model`), so older exports can be given
    one too.

    Args:
        saved_model_dir: one version folder (`saved_models/<name>/<version>`).
        batch_sizes: the sentences per request; one request per bucket and
            batch size. A `jit_compile` SavedModel compiles per number of
            rows rounded up to a power of two: list those its clients send.

    Returns:
        The file's path.
    """
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
        buckets = json.load(f)["buckets"]
    check_batch_sizes(batch_sizes, len(buckets))
    with open(tokenizer_file, "rb") as f:
        sentences = warmup_sentences(f.read(), buckets)
    path = warmup_path(saved_model_dir)
    with tf.io.TFRecordWriter(path) as writer:
        for sentence in sentences:
            for size in batch_sizes:
                request = predict_pb2.PredictRequest()
                request.model_spec.signature_name = SIGNATURE
                request.inputs[INPUT_KEY].CopyFrom(tf.make_tensor_proto([sentence] * size, dtype=tf.string))
                log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
                writer.write(log.SerializeToString())
    return path


def read_warmup_requests(saved_model_dir):
    """Each warm-up request's input sentences (a list of lists of str); [] without a file.

    Raises:
        OSError: if the file is not a TFRecord file of predict requests with
            a string `inputs` tensor (TF Serving would refuse to load it).
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
            tensor = log.predict_log.request.inputs[INPUT_KEY]
            if log.WhichOneof("log_type") != "predict_log" or tensor.dtype != tf.string.as_datatype_enum:
                raise ValueError("not a predict request with a string `inputs` tensor")
            requests.append([text.decode("utf-8") for text in tf.make_ndarray(tensor).reshape(-1).tolist()])
    except Exception as error:  # tf.errors.DataLossError, protobuf's DecodeError, ...
        raise OSError(f"Cannot read the warm-up requests at {path!r}: {error}") from error
    if len(requests) > MAX_WARMUP_REQUESTS:
        raise OSError(
            f"{path!r} holds {len(requests)} warm-up requests; TF Serving replays at most {MAX_WARMUP_REQUESTS}"
        )
    return requests


def replay_warmup_requests(predict, saved_model_dir):
    """Runs each warm-up request through `predict(list[str])`; returns `(requests, seconds)`."""
    requests = read_warmup_requests(saved_model_dir)
    start = time.perf_counter()
    for inputs in requests:
        predict(inputs)
    return len(requests), time.perf_counter() - start
