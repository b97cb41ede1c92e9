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
>>> predict([SignatureRow("details", {"inputs": "I love you."})])   # the signature's own outputs
[{'translations': "Je t'aime.", 'scores': -0.69..., 'confidences': -0.16..., 'alignments': '0-0 2-1', ...}]

A string is translated by the `serving_default` signature, as exported. An
`Instance` asks for more (the REST API's optional fields of an instance):
the `details` signature (confidences, alignments, up to the exported
`n_best` best), `sample` (sampling), `score` (a given translation's
scores) or `steer` (a target prefix, constraints). Each comes back as
`Translator.hypotheses` and `Translator.score` give it
(`keras_transformer.translation.outputs.prediction`), the same numbers: an n-best list
holds only the hypotheses the search finished. A `SignatureRow` calls a
signature by name with its own inputs and returns its outputs as they are,
as TF Serving does (the REST API's `signature_name`).

Every call is checked first by the rules of
`keras_transformer.translation.request_checks`, with the SavedModel's own tokenizer
and lengths, as the `Translator` checks it; a request that breaks one is a
`ValueError` naming the field, and the graph itself refuses what passes
here by mistake (`InvalidRequest`).
"""

import dataclasses
import os
import typing
from typing import Optional

import numpy as np

from keras_transformer.compat.saved_model import saved_model_signature_defs
from keras_transformer.decoding.beam_search import check_stop
from keras_transformer.decoding.common import is_finished
from keras_transformer.decoding.defaults import MAX_EXTRA_LENGTH, SAMPLING
from keras_transformer.decoding.random_sampling import RandomSampler
from keras_transformer.tokens import EOS_ID, pack_source
from keras_transformer.translation import markup
from keras_transformer.translation import request_checks as checks
from keras_transformer.translation.outputs import Hypothesis, TokenScores, prediction
from keras_transformer.translation.preprocessor import DEFAULT_BUCKETS, TranslationPreprocessor
from keras_transformer.translation.saved_model_files import latest_version, read_metadata
from keras_transformer.translation.tokenizer import SubwordTokenizer
from keras_transformer.validation import check_phrases


class InvalidRequest(ValueError):
    """A request the SavedModel's graph refused (its `InvalidArgumentError`):
    the caller's mistake, as TF Serving answers it with 400."""


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Sampling's settings (`keras_transformer.decoding.random_sampling.RandomSampler`)."""

    seed: int = SAMPLING["seed"]
    temperature: float = SAMPLING["temperature"]
    top_k: int = SAMPLING["top_k"]
    top_p: float = SAMPLING["top_p"]

    def __post_init__(self):
        RandomSampler(top_k=self.top_k, top_p=self.top_p, temperature=self.temperature, seed=self.seed)  # checks


@dataclasses.dataclass(frozen=True)
class Instance:
    """One input and the outputs asked for it: the REST API's instance
    object, whose fields are these (a new one is declared here, with its
    type, and checked by `__post_init__`).

    `targets`: score this translation of `inputs` instead of translating.
    `n_best`: also the n best translations. `alignments`: also each
    translation's word alignment. `confidences`: its confidence, which
    comes with any of these unless `False`. `sampling`: sample instead of
    searching. `target_prefix`: the translation starts with it;
    `constraints`: a list of phrases that it holds, none blank (both by the
    `steer` signature; not with `sampling` or `targets`). `stop`: beam
    search's stop rule, which must be the one the SavedModel was exported
    with (its graph holds that rule's search). `format`: of
    `keras_transformer.translation.markup.FORMATS`; `"html"` carries the markup through,
    by the `details` signature's alignments, and takes no other option. An
    instance that asks for nothing more than its translation is a plain
    string's.
    """

    inputs: str
    n_best: int = 1
    alignments: bool = False
    confidences: Optional[bool] = None
    sampling: Optional[Sampling] = None
    targets: Optional[str] = None
    target_prefix: Optional[str] = None
    constraints: Optional[tuple] = None
    stop: Optional[str] = None
    format: str = "text"

    def __post_init__(self):
        if self.stop is not None:
            check_stop(self.stop)
        if self.constraints is not None:
            check_phrases("constraints", self.constraints)
            object.__setattr__(self, "constraints", tuple(self.constraints))
        for field, kind in typing.get_type_hints(type(self)).items():
            _check_type(field, getattr(self, field), kind)
        checks.check_n_best(self.n_best, sampling=self.sampling is not None)
        markup.check_format(self.format)
        asked = [f.name for f in dataclasses.fields(self)
                 if f.name not in ("inputs", "format", "stop") and getattr(self, f.name) != f.default]
        if self.format != "text" and asked:
            raise ValueError(f"`format` {self.format!r} returns translations only: it takes no other option. "
                             f"Received: format={self.format!r} with {', '.join(asked)}")
        if self.targets is not None and (self.sampling or self.n_best > 1 or self.alignments or self.confidences):
            raise ValueError("`targets` scores a given translation: it takes no other option. Received: targets with "
                             "n_best, alignments, confidences or sampling")
        if self.steered and (self.sampling is not None or self.targets is not None):
            raise ValueError("`target_prefix` and `constraints` steer a searched translation: the SavedModel does not "
                             "take them with `sampling` or `targets`. Received: target_prefix or constraints with "
                             "sampling or targets")

    @property
    def steered(self):
        return self.target_prefix is not None or self.constraints is not None

    @property
    def plain(self):
        """Whether it asks for nothing but its translation (and score): its
        other fields at their defaults, `confidences` not true."""
        return not self.confidences and self == Instance(self.inputs, confidences=self.confidences, stop=self.stop)

    @property
    def signature(self):
        if self.plain:
            return "serving_default"
        if self.targets is not None:
            return "score"
        if self.steered:
            return "steer"
        return "sample" if self.sampling is not None else "details"


def _check_type(name, value, kind):
    """Raises `ValueError` unless `value` is of the annotated `kind`
    (`Optional[...]` also takes None; a tuple field also takes a list)."""
    arguments = typing.get_args(kind)
    optional = typing.get_origin(kind) is typing.Union and type(None) in arguments
    if optional:
        if value is None:
            return
        kind = next(a for a in arguments if a is not type(None))
    kinds = (list, tuple) if kind is tuple else (kind,)
    if not isinstance(value, kinds) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"`{name}` must be {kind.__name__}{' or None' if optional else ''}. Received: {name}={value!r}")


@dataclasses.dataclass(frozen=True)
class SignatureRow:
    """One instance of a request that names its signature (TF Serving's
    `signature_name`): `inputs` holds the signature's inputs by name, a
    string (or a tuple of strings for `constraints`) per instance, and the
    scalars the request shares (`sample`'s seed and settings)."""

    signature: str
    inputs: dict

    def __hash__(self):
        return hash((self.signature, tuple(sorted(self.inputs.items()))))

    def scalars(self):
        """The inputs that are numbers: the request's, shared by its rows."""
        return tuple(sorted((name, value) for name, value in self.inputs.items()
                            if not isinstance(value, (str, list, tuple))))


def _rectangular(rows):
    """Lists of strings (each row's constraints) as a `[rows, width]`
    tensor's values: `""`, which the `steer` signature takes for none, after
    each row's last; a column at least."""
    width = max(1, max(map(len, rows)))
    return [list(row) + [""] * (width - len(row)) for row in rows]


def _nbest_rows(row, n_best, alignments, confidences=True):
    """A signature's row as the `Translator` gives it
    (`outputs.prediction`): the search's placeholders (hypotheses it never
    finished) left out of its n-best lists, and confidences only if they
    are asked."""
    fields = ("translations", "scores", "confidences", "alignments")
    best = Hypothesis(*(row.get(key) for key in fields))
    if n_best > 1 and "nbest_scores" in row:
        ranks = [r for r in range(min(n_best, len(row["nbest_scores"]))) if is_finished(row["nbest_scores"][r])]
        hypotheses = [Hypothesis(*(row[f"nbest_{key}"][r] if key in row else None for key in fields)) for r in ranks]
        out = prediction(hypotheses or [best], n_best, alignments and "alignments" in row)
    else:
        out = prediction([best], 1, alignments and "alignments" in row)
    if not confidences or "confidences" not in row:
        out.pop("confidences"), out.pop("nbest_confidences", None)
    return out


def _score_row(row):
    """A `score` signature's row as `Translator.score` gives it
    (`TokenScores.prediction`): its padding's empty pieces left out."""
    kept = [i for i, token in enumerate(row["tokens"]) if token]
    return TokenScores([row["tokens"][i] for i in kept], [row["token_log_probs"][i] for i in kept], row["totals"],
                       row["scores"]).prediction()


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

    `predict` is a `SavedModelPredictor`. TensorFlow's process-wide
    settings (thread pools) are the caller's: the command line sets them
    for its own process
    (`keras_transformer.cli.common.set_tensorflow_process_options`).
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops

    version, version_dir = latest_version(path)
    try:
        loaded = tf.saved_model.load(version_dir)
    except Exception as error:  # IndexError, tf.errors.OpError, ... on a damaged file
        raise OSError(f"Cannot load the SavedModel at {version_dir!r}: {error}") from error
    return SavedModelPredictor(loaded, version_dir), int(version) if str(version).isdigit() else 1


class SavedModelPredictor:
    """`predict(items) -> rows`: each item a string, an `Instance` or a
    `SignatureRow`, answered by the loaded SavedModel's signatures.

    Attributes:
        signatures: the signatures' names, sorted.
        signature_inputs: `{signature: {input: (dtype name, rank)}}`.
        n_best: the exported `n_best`.
        stop: the exported stop rule (`"exact"` for an export that records
            none: it was made before the option).
        saved_model: the loaded object (its variables live as long as it).
        version_dir: the version folder.
    """

    def __init__(self, loaded, version_dir):
        self.saved_model, self.version_dir = loaded, version_dir
        self.metadata = read_metadata(version_dir)
        self.n_best = int(self.metadata.get("n_best", 1))
        self.stop = self.metadata.get("stop", "exact")
        self.signatures = sorted(loaded.signatures)
        self.signature_inputs = {name: {key: (spec.dtype.name, spec.shape.rank) for key, spec in
                                        loaded.signatures[name].structured_input_signature[1].items()}
                                 for name in self.signatures}
        self._rules = _request_rules(version_dir, self.metadata)

    def __call__(self, items):
        """The outputs of each of `items`, in order."""
        rows = [None] * len(items)
        for key, indices in self._groups(items).items():
            found = self._run_group(key, [items[i] for i in indices], [f"items[{i}]" for i in indices])
            for i, row in zip(indices, found):
                rows[i] = row
        return rows

    def check(self, items, labels=None):
        """Raises `ValueError` for the first of `items` the SavedModel cannot
        answer, by the rules of `keras_transformer.translation.request_checks`; `labels`
        name the items in the message (default `items[i]`)."""
        labels = labels or [f"items[{i}]" for i in range(len(items))]
        for key, indices in self._groups(items).items():
            self._check_group(key, [items[i] for i in indices], [labels[i] for i in indices])

    def call(self, name, inputs):
        """Signature `name` called with `inputs`, `{input: array}`, as TF
        Serving calls it (its warm-up requests): its outputs as arrays."""
        import tensorflow as tf

        return self._signature(name)(**{key: tf.constant(value) for key, value in inputs.items()})

    def signature_defs(self):
        """The SavedModel's signature defs as TF Serving's model metadata API
        returns them (the JSON form of its `SignatureDefMap`)."""
        return signature_def_map(self.version_dir)

    # ------------------------------------------------------------ internals
    def _groups(self, items):
        """`{key: indices}`: the items one signature call answers together;
        `("markup", format)`: documents whose markup or placeholders the
        `details` signature's alignments carry through (`_run_markup`)."""
        groups = {}
        for index, item in enumerate(items):
            text = item if isinstance(item, str) else getattr(item, "inputs", None)
            if isinstance(item, Instance) and item.format != "text":
                key = ("markup", item.format)
            elif isinstance(item, str) or isinstance(item, Instance) and item.plain:
                key = ("serving_default",)
                if "details" in self.signatures and markup.has_placeholders(text):
                    key = ("markup", "text")
            elif isinstance(item, SignatureRow):
                key = ("raw", item.signature, item.scalars())
            else:
                key = (item.signature, item.sampling)
            groups.setdefault(key, []).append(index)
        return groups

    def _signature(self, name):
        if name not in self.saved_model.signatures:
            raise ValueError(f'Serving signature name: "{name}" not found in signature def: this SavedModel has '
                             f"{self.signatures}. Received: signature_name={name!r}")
        return self.saved_model.signatures[name]

    def _arguments(self, key, items):
        """`(signature, texts, arguments, shape)`: a group's signature call,
        and how its rows are shaped: `"raw"` (as the signature returns them),
        `"plain"` (a string's), `"score"` or `"rows"` (as each `Instance` asks)."""
        if key[0] == "raw":
            name = key[1]
            self._signature(name)
            arguments = {}
            for input_name, (_, rank) in self.signature_inputs[name].items():
                if input_name == "inputs":
                    continue
                if rank == 0:
                    arguments[input_name] = items[0].inputs[input_name]
                elif rank == 2:  # `constraints`
                    arguments[input_name] = _rectangular([item.inputs[input_name] for item in items])
                else:
                    arguments[input_name] = [item.inputs[input_name] for item in items]
            return name, [item.inputs["inputs"] for item in items], arguments, "raw"
        if key[0] == "serving_default":
            return "serving_default", [item if isinstance(item, str) else item.inputs for item in items], {}, "plain"
        name, sampling = key
        arguments = {}
        if name == "score":
            arguments["targets"] = [item.targets for item in items]
        if name == "steer":
            arguments["target_prefix"] = [item.target_prefix or "" for item in items]
            arguments["constraints"] = _rectangular([item.constraints or () for item in items])
        if sampling is not None:
            arguments.update(seed=sampling.seed, temperature=sampling.temperature, top_k=sampling.top_k,
                             top_p=sampling.top_p)
        return name, [item.inputs for item in items], arguments, "score" if name == "score" else "rows"

    def _check_group(self, key, items, labels):
        for item in items:
            if isinstance(item, Instance) and item.stop not in (None, self.stop):
                raise ValueError(f"`stop` must be {self.stop!r}, the stop rule this SavedModel was exported with "
                                 f"(`keras-transformer export --stop`). Received: stop={item.stop!r}")
        if key[0] == "markup":
            require_signature("details", self.signatures)
            for item, label in zip(items, labels):
                if key[1] == "html":
                    markup.html_runs(item.inputs, f"{label}.inputs")  # broken HTML: a ValueError naming it
            return
        if key[0] != "raw":
            require_signature(key[0], self.signatures)
        name, texts, arguments, _ = self._arguments(key, items)
        for item in items:
            if isinstance(item, Instance) and item.n_best > self.n_best:
                raise ValueError(f"`n_best` must be at most {self.n_best}, the n_best this SavedModel was exported "
                                 f"with. Received: n_best={item.n_best}")
        if self._rules is not None:
            self._rules.check(name, texts, arguments, labels)

    def _run_markup(self, format, items, labels):
        """`Translator.translate(texts, format=...)` of the items' texts:
        `keras_transformer.translation.markup` around the `serving_default` signature, and
        the `details` signature's alignments where a run holds markup."""
        def run(name, texts, **options):
            runs = [f"{labels[0]} (run {j})" for j in range(len(texts))]
            return self._run_group((name, None) if options else (name,), texts, runs)

        def align(texts):
            rows = run("details", [Instance(t, alignments=True) for t in texts], alignments=True)
            return [(row["translations"], row["alignments"]) for row in rows]

        texts = [item if isinstance(item, str) else item.inputs for item in items]
        documents = markup.translate(texts, format, align, lambda t: [r["translations"] for r in run(
            "serving_default", t)])
        return [{"translations": document} for document in documents]

    def _run_group(self, key, items, labels):
        import tensorflow as tf

        if key[0] == "markup":
            self._check_group(key, items, labels)
            return self._run_markup(key[1], items, labels)
        self._check_group(key, items, labels)
        name, texts, arguments, shape = self._arguments(key, items)
        specs = self.signature_inputs[name]
        tensors = {input_name: tf.constant(value, specs[input_name][0]) for input_name, value in arguments.items()}
        try:
            outputs = self._signature(name)(inputs=tf.constant(texts, tf.string), **tensors)
        except tf.errors.InvalidArgumentError as error:
            raise InvalidRequest(_graph_error(error.message)) from None
        columns = {output: _to_python(value.numpy()) for output, value in outputs.items()}
        rows = [{output: column[i] for output, column in columns.items()} for i in range(len(texts))]
        if shape == "raw":
            return rows
        if shape == "score":
            return [_score_row(row) for row in rows]
        if shape == "plain":
            return [_nbest_rows(row, self.n_best, alignments=False) for row in rows]
        return [_nbest_rows(row, item.n_best, item.alignments, item.confidences is not False)
                for row, item in zip(rows, items)]


def require_signature(name, signatures):
    """Raises `ValueError` unless the SavedModel has the signature `name`
    that an `Instance` needs (`signatures`, its signatures' names)."""
    if name not in signatures:
        raise ValueError(f"This SavedModel has no `{name}` signature: export it with `--signatures {name}`. "
                         f"Received: an instance that needs it; the signatures are {sorted(signatures)}")


def _graph_error(message):
    """The line of a graph's `InvalidArgumentError` that says what was
    wrong: its failed assertion's, else its first."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("assertion failed:")), lines[0] if lines else message)


class _RequestRules:
    """`keras_transformer.translation.request_checks` with a SavedModel's tokenizer and
    lengths, applied to a signature call before it runs: what the
    `Translator` the SavedModel was exported from would check."""

    def __init__(self, tokenizer, preprocessor, max_extra_length):
        self.tokenizer, self.preprocessor, self.max_extra_length = tokenizer, preprocessor, max_extra_length

    def check(self, name, texts, arguments, labels):
        if name == "steer":
            # "" (and blank) constraints fill a row of the `constraints` tensor: none.
            phrases = [[c for c in row if c.strip()] for row in arguments["constraints"]]
            self.steering(texts, arguments["target_prefix"], phrases, labels)
        if name == "score":
            targets = arguments["targets"]
            checks.check_score_pairs([pack_source(ids) for ids in self.tokenizer.encode(list(texts))],
                                     [[*ids, EOS_ID] for ids in self.tokenizer.encode_target(list(targets))],
                                     self.preprocessor.max_length, ("inputs", "targets"), (texts, targets), labels)

    def steering(self, texts, prefixes, phrases, labels):
        sentences, frames = self.preprocessor.texts(list(texts))  # as the graph cuts them (`split_sentences`)
        pieces, of = self.preprocessor.pieces(sentences)
        owners = [frames.owners[text] for text in of]  # each piece's input
        steering = checks.sentence_steering(self.tokenizer, prefixes, phrases, len(texts), labels)
        checks.piece_steering(steering, pieces, owners, self.max_extra_length, self.preprocessor.max_length,
                              prefixes, phrases, labels)


def _request_rules(version_dir, metadata):
    """The `_RequestRules` of a SavedModel written by this package: its
    tokenizer (assets/tokenizer.model) and the lengths in its metadata; None
    if any is missing (its graph still checks each call)."""

    try:
        max_length = int(metadata["model_config"]["max_length"])
        max_extra_length = int(metadata.get("max_extra_length", MAX_EXTRA_LENGTH))
        tokenizer = SubwordTokenizer.load(os.path.join(version_dir, "assets", "tokenizer.model"))
        preprocessor = TranslationPreprocessor(tokenizer, max_length, max_extra_length,
                                               metadata.get("long_inputs", "split"),
                                               tuple(metadata.get("buckets", DEFAULT_BUCKETS)),
                                               bool(metadata.get("split_sentences", False)))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return _RequestRules(tokenizer, preprocessor, max_extra_length)


def signature_def_map(version_dir):
    """The `signature_def` of the SavedModel's serving graph, as TF
    Serving's REST API returns it in a model's metadata: the JSON form of
    its `SignatureDefMap` proto, with the protos' own field names and every
    field printed."""
    from google.protobuf import json_format
    from tensorflow_serving.apis import get_model_metadata_pb2

    signatures = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in saved_model_signature_defs(version_dir).items():
        signatures.signature_def[name].CopyFrom(signature)
    try:
        return json_format.MessageToDict(signatures, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf < 5.26 names the option otherwise
        return json_format.MessageToDict(signatures, preserving_proto_field_name=True,
                                         including_default_value_fields=True)
