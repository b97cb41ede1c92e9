"""Loading an exported SavedModel as a Python function, without any server package.

`keras-transformer serve` puts it behind HTTP
(keras_transformer.serving.server, which needs fastapi).

Example:

>>> from keras_transformer.serving.predictor import load_saved_model_predictor
>>> predict, version = load_saved_model_predictor("saved_models/tatoeba_en_fr")
>>> predict(["I love you.", ""])
[{'translations': "Je t'aime.", 'scores': -0.69...}, {'translations': '', 'scores': 0.0}]
>>> predict([Instance("I love you.", n_best=2, alignments=True)])   # the `details` signature
[{'translations': "Je t'aime.", 'scores': -0.69..., 'confidences': -0.16..., 'alignments': '0-0 2-1', ...}]

A string is translated by the `serving_default` signature, as exported. An
`Instance` asks for more (the REST API's optional fields of an instance):
the `details` signature (confidences, alignments, up to the exported
`n_best` best), `sample` (sampling), or `score` (a given translation's
scores). Each comes back as `Translator.hypotheses` and `Translator.score`
give it (`keras_transformer.translator.prediction`), the same numbers.
"""

import dataclasses
import json
import os
from typing import Optional

import numpy as np

from keras_transformer.decoding.common import NEG_INF
from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH
from keras_transformer.decoding.random_sampling import RandomSampler
from keras_transformer.request_checks import (
    check_n_best,
    check_score_length,
    leaves_room,
    scoring_limits,
    steering_room,
)
from keras_transformer.validation import check_phrases


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Sampling's settings (`keras_transformer.decoding.random_sampling.RandomSampler`)."""

    seed: int = 0
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        RandomSampler(top_k=self.top_k, top_p=self.top_p, temperature=self.temperature, seed=self.seed)  # checks


@dataclasses.dataclass(frozen=True)
class Instance:
    """One input and the outputs asked for it.

    `targets`: score this translation of `inputs` instead of translating.
    `n_best`: also the n best translations. `alignments`: also each
    translation's word alignment. `confidences`: also its confidence (it
    comes with any of these). `sampling`: sample instead of searching.
    `target_prefix`: the translation starts with it; `constraints`: a
    list of phrases that it holds, none blank (both by the `steer`
    signature; not with `sampling` or `targets`).
    """

    inputs: str
    n_best: int = 1
    alignments: bool = False
    confidences: bool = False
    sampling: Optional[Sampling] = None
    targets: Optional[str] = None
    target_prefix: Optional[str] = None
    constraints: Optional[tuple] = None

    def __post_init__(self):
        checks = (("inputs", str, False), ("n_best", int, False), ("alignments", bool, False),
                  ("confidences", bool, False), ("sampling", Sampling, True), ("targets", str, True),
                  ("target_prefix", str, True))
        for name, kind, optional in checks:
            value = getattr(self, name)
            if not (optional and value is None) and (not isinstance(value, kind) or kind is int and isinstance(value, bool)):
                raise ValueError(f"`{name}` must be {kind.__name__}{' or None' if optional else ''}. "
                                 f"Received: {name}={value!r}")
        check_n_best(self.n_best, sampling=self.sampling is not None)
        if self.targets is not None and (self.sampling or self.n_best > 1 or self.alignments or self.confidences):
            raise ValueError("`targets` scores a given translation: it takes no other option. Received: targets with "
                             "n_best, alignments, confidences or sampling")
        if self.constraints is not None:
            check_phrases("constraints", self.constraints)
            object.__setattr__(self, "constraints", tuple(self.constraints))
        if self.steered and (self.sampling is not None or self.targets is not None):
            raise ValueError("`target_prefix` and `constraints` steer a searched translation: the SavedModel does not "
                             "take them with `sampling` or `targets`. Received: target_prefix or constraints with "
                             "sampling or targets")

    @property
    def steered(self):
        return self.target_prefix is not None or self.constraints is not None

    @property
    def signature(self):
        if self.targets is not None:
            return "score"
        if self.steered:
            return "steer"
        return "sample" if self.sampling is not None else "details"


def _nbest_rows(row, n_best, alignments):
    """A `details` or `sample` row as `Translator.hypotheses` gives it."""
    out = {key: row[key] for key in ("translations", "scores", "confidences")}
    if alignments:
        out["alignments"] = row["alignments"]
    if n_best > 1:
        # The search's placeholders (hypotheses it never finished) are left out.
        ranks = [r for r in range(n_best) if row["nbest_scores"][r] > NEG_INF / 2]
        for key in ("translations", "scores", "confidences") + (("alignments",) if alignments else ()):
            out[f"nbest_{key}"] = [row[f"nbest_{key}"][r] for r in ranks]
    return out


def _score_row(row):
    kept = [i for i, token in enumerate(row["tokens"]) if token]
    return {"scores": row["scores"], "totals": row["totals"], "tokens": [row["tokens"][i] for i in kept],
            "token_log_probs": [row["token_log_probs"][i] for i in kept]}


def latest_version(model_dir):
    """The highest numbered version folder of a TF Serving model folder."""
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"No model folder at {model_dir!r}")
    if os.path.exists(os.path.join(model_dir, "saved_model.pb")):
        return os.path.basename(os.path.normpath(model_dir)), model_dir
    versions = [d for d in os.listdir(model_dir) if d.isdigit()]
    if not versions:
        raise FileNotFoundError(
            f"{model_dir!r} holds no numbered version folder with a saved_model.pb "
            "(expected <name>/<version>/saved_model.pb)"
        )
    version = max(versions, key=int)
    return version, os.path.join(model_dir, version)


def _to_python(array):
    """A NumPy output as JSON-ready Python values (bytes decoded)."""
    if array.dtype == object:
        return np.vectorize(lambda b: b.decode("utf-8"), otypes=[object])(array).tolist()
    return array.tolist()


def load_saved_model_predictor(path):
    """Loads an exported SavedModel; returns `(predict, version)`.

    Args:
        path: a model folder (`saved_models/<name>`, its latest version is
            used) or one version folder.

    TensorFlow's process-wide settings (thread pools) are the caller's:
    the command line sets them for its own process
    (`keras_transformer.cli.common.set_tensorflow_process_options`).
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    version, version_dir = latest_version(path)
    try:
        loaded = tf.saved_model.load(version_dir)
    except Exception as error:  # IndexError, tf.errors.OpError, ... on a damaged file
        raise OSError(f"Cannot load the SavedModel at {version_dir!r}: {error}") from error

    signatures = loaded.signatures
    metadata = read_metadata(version_dir)
    n_best = int(metadata.get("n_best", 1))

    def run(name, texts, **arguments):
        outputs = signatures[name](inputs=tf.constant(texts), **arguments)
        columns = {key: _to_python(value.numpy()) for key, value in outputs.items()}
        return [{key: column[i] for key, column in columns.items()} for i in range(len(texts))]

    def predict(items):
        """The outputs of each of `items`: strings, or `Instance`s."""
        rows = [None] * len(items)
        groups = {}
        for index, item in enumerate(items):
            key = "serving_default" if isinstance(item, str) else (item.signature, item.sampling)
            groups.setdefault(key, []).append(index)
        for key, indices in groups.items():
            if key == "serving_default":
                for i, row in zip(indices, run("serving_default", [items[i] for i in indices])):
                    rows[i] = row
                continue
            name, sampling = key
            check_instances([items[i] for i in indices], signatures, n_best, predict.score_lengths)
            texts = [items[i].inputs for i in indices]
            if name == "score":
                found = run(name, texts, targets=tf.constant([items[i].targets for i in indices]))
                for i, row in zip(indices, found):
                    rows[i] = _score_row(row)
                continue
            arguments = {}
            if name == "steer":
                steered = [items[i] for i in indices]
                width = max(1, max(len(item.constraints or ()) for item in steered))
                arguments["target_prefix"] = tf.constant([item.target_prefix or "" for item in steered])
                arguments["constraints"] = tf.constant(
                    [list(item.constraints or ()) + [""] * (width - len(item.constraints or ())) for item in steered],
                    tf.string)
            if sampling is not None:
                arguments.update(
                    seed=tf.constant(sampling.seed, tf.int32),
                    temperature=tf.constant(sampling.temperature, tf.float32),
                    top_k=tf.constant(sampling.top_k, tf.int32), top_p=tf.constant(sampling.top_p, tf.float32))
            for i, row in zip(indices, run(name, texts, **arguments)):
                rows[i] = _nbest_rows(row, items[i].n_best, items[i].alignments)
        return rows

    predict.n_best, predict.signatures, predict.saved_model = n_best, sorted(signatures), loaded
    predict.score_lengths = _score_lengths(version_dir, metadata)
    return predict, int(version) if str(version).isdigit() else 1


def _score_lengths(version_dir, metadata):
    """`(count_tokens, max_length, max_extra_length)` for the length checks
    of the `score` and `steer` signatures: the SavedModel's own tokenizer
    (assets/tokenizer.model), its model's `max_length` and its output
    length limit; None if any is missing."""
    import sentencepiece as spm

    try:
        max_length = int(metadata["model_config"]["max_length"])
        max_extra_length = int(metadata.get("max_extra_length", MAX_EXTRA_LENGTH))
        processor = spm.SentencePieceProcessor(model_file=os.path.join(version_dir, "assets", "tokenizer.model"))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return (lambda text: len(processor.encode(text)) + 1), max_length, max_extra_length  # with its EOS


def read_metadata(version_dir):
    """The SavedModel's `assets.extra/metadata.json` (its export settings), or {}."""
    try:
        with open(os.path.join(version_dir, "assets.extra", "metadata.json"), encoding="utf-8") as f:
            metadata = json.load(f)
    except (OSError, ValueError):
        return {}
    return metadata if isinstance(metadata, dict) else {}


def check_instances(instances, signatures, n_best, score_lengths=None):
    """Raises `ValueError` for an `Instance` the SavedModel cannot answer:
    a signature it was exported without, more than its `n_best`, or (with
    `score_lengths`, `(count_tokens, max_length, max_extra_length)`) a
    text to score over the model's length, or a target prefix and
    constraints that leave its translation no room, by the checks
    `Translator` makes (`keras_transformer.request_checks`)."""
    for instance in instances:
        if instance.steered and score_lengths is not None:
            count, max_length, max_extra_length = score_lengths
            texts = [instance.target_prefix or "", *(instance.constraints or ())]
            forced = sum(count(text) - 1 for text in texts)  # without their EOS
            room = steering_room(count(instance.inputs), max_extra_length, max_length)
            if not leaves_room(forced, room):
                prefix, phrases = (instance.target_prefix or "")[:40], len(instance.constraints or ())
                raise ValueError(f"`target_prefix` and `constraints` force {forced} tokens; the translation may have "
                                 f"at most {room}, so they must be shorter. Received: target_prefix={prefix!r}, "
                                 f"{phrases} constraints")
        if instance.targets is not None and score_lengths is not None:
            count, max_length, _ = score_lengths
            for name, text, most in zip(("inputs", "targets"), (instance.inputs, instance.targets),
                                        scoring_limits(max_length)):
                check_score_length(name, count(text), most, f"{text[:40]!r}...", counted=" with its EOS")
        if instance.signature not in signatures:
            raise ValueError(
                f"This SavedModel has no `{instance.signature}` signature: export it with "
                f"`--signatures {instance.signature}`. "
                f"Received: an instance that needs it; the signatures are {sorted(signatures)}"
            )
        if instance.n_best > n_best:
            raise ValueError(
                f"`n_best` must be at most {n_best}, the n_best this SavedModel was exported with. "
                f"Received: n_best={instance.n_best}"
            )
