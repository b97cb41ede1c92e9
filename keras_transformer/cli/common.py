"""What several commands share: argument types and loading a model to translate with.

A command's MODEL argument is a preset (a shipped name such as
`tatoeba_en_fr`, or a directory holding `config.json`), a SavedModel folder
(`saved_models/<name>`), a `.keras` file, or (for `export`) a training run
folder with `--weights`. Presets come first: a shipped name wins over a
folder of the same name in the working directory, as in `from_preset`.

Example:

>>> from keras_transformer.cli.common import translate_function
>>> translate, _, _ = translate_function("saved_models/tatoeba_en_fr")
>>> translate(["I love you."])
["Je t'aime."]
>>> translate, model, tokenizer = translate_function("tatoeba_en_fr")   # the shipped preset
"""

import argparse
import itertools
import os


def positive_int(text):
    """An argparse `type`: an integer >= 1.

    >>> positive_int("8")
    8
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1. Received: {text}")
    return value


def load_keras_model(path, weights=None):
    """A `.keras` file, or a training run folder (`run.json`) with `weights`
    (e.g. the output of `average-checkpoints`)."""
    import keras

    from keras_transformer import Transformer
    from keras_transformer.training.manifest import read_manifest

    if os.path.isdir(path):
        manifest = read_manifest(path)
        if manifest is None or not weights:
            raise SystemExit(
                f"{path!r} is a folder: expected a training run (run.json) and --weights "
                "(a .weights.h5 file, e.g. from average-checkpoints)"
            )
        model = Transformer(**manifest.get("identity", manifest)["model"])
        model.build(((None, None), (None, None)))
        model.load_weights(weights)
        return model
    if not os.path.isfile(path):
        raise SystemExit(f"No model file at {path!r} (expected a .keras file or a run folder)")
    return keras.saving.load_model(path, compile=False)


def preset_path(name):
    """The directory of the preset `name` names (a shipped preset name, or a
    directory holding `config.json`), else None. An architecture name
    (`tiny`, ...) is a `ValueError` saying it has no weights.

    >>> os.path.basename(preset_path("tatoeba_en_fr"))
    'tatoeba_en_fr'
    >>> preset_path("saved_models/tatoeba_en_fr") is None
    True
    """
    from keras_transformer.models.config import ARCHITECTURES
    from keras_transformer.presets import CONFIG_FILE, list_presets, preset_directory

    if name in list_presets() or os.path.isfile(os.path.join(name, CONFIG_FILE)):
        return preset_directory(name)
    if name in ARCHITECTURES and not os.path.exists(name):
        preset_directory(name)  # raises: an architecture has no weights
    return None


def no_tokenizer_with_preset(model, tokenizer):
    """A preset carries its own tokenizer: `--tokenizer` beside one is an error."""
    if tokenizer is not None:
        raise ValueError(
            f"--tokenizer is for a .keras model or a run folder; the preset {model!r} has its own "
            f"tokenizer.model. Received: --tokenizer={tokenizer!r}"
        )


def no_such_model(model):
    """The error for a MODEL that is no preset, SavedModel folder or .keras file."""
    from keras_transformer.presets import list_presets

    return FileNotFoundError(
        f"No model at {model!r}: expected a shipped preset (one of {list_presets()}), a preset "
        f"directory (config.json), a SavedModel folder (saved_models/<name>) or a .keras file. "
        f"Received: model={model!r}"
    )


def load_tokenizer(path):
    """The `SubwordTokenizer` of the `.model` file given as `--tokenizer`."""
    from keras_transformer.data.tokenizer import SubwordTokenizer

    if not path or not os.path.isfile(path):
        raise SystemExit(f"--tokenizer must name a SentencePiece .model file. Received: {path!r}")
    return SubwordTokenizer.load(path)


def add_model_argument(p):
    """The model a translating command reads: a preset, a SavedModel folder or a `.keras` file."""
    p.add_argument("model", help="a preset (a shipped name such as tatoeba_en_fr, or a preset directory), "
                                 "a SavedModel folder (saved_models/<name>) or a .keras file")


def add_decoding_arguments(p, batch_size=True):
    """The `Translator`'s decoding options, for a preset or a `.keras` model;
    unset, the `Translator`'s defaults (`keras_transformer.decoding.defaults`)."""
    from keras_transformer.decoding.defaults import ALPHA, BATCH_SIZE, BEAM_SIZE
    from keras_transformer.preprocessor import LONG_INPUTS

    if batch_size:
        p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE, help="sentences per batch")
    p.add_argument("--beam-size", type=positive_int, default=None, help=f"1 decodes greedily (default: {BEAM_SIZE})")
    p.add_argument("--alpha", type=float, default=None, help=f"the length penalty's exponent (default: {ALPHA})")
    p.add_argument("--long-inputs", choices=LONG_INPUTS, default=None,
                   help="an input over the model's source budget is split at sentence ends (the default) or "
                        "truncated")
    p.add_argument("--quantize", choices=["int8"], default=None,
                   help="quantize the weights at load (Keras' model.quantize)")
    p.add_argument("--narrow-batches", action="store_true", default=None,
                   help="a compiled batch narrows to its half, then its quarter, as its sentences finish "
                        "(Translator(narrow_batches=True)); each batch shape compiles longer")


def decoding_options(args):
    """The decoding options given on the command line, as `Translator` arguments."""
    from keras_transformer.translator import DECODING_OPTIONS

    return {name: getattr(args, name) for name in DECODING_OPTIONS if getattr(args, name, None) is not None}


def add_output_arguments(p):
    """What a translation returns, and sampling instead of the search
    (`Translator.hypotheses`, `keras_transformer.decoding.sampling`)."""
    p.add_argument("--scores", action="store_true",
                   help="write JSON lines with each translation's score and confidence")
    p.add_argument("--n-best", type=positive_int, default=1, metavar="N",
                   help="also write the N best translations, with their scores (JSON lines; N <= the beam size)")
    p.add_argument("--alignments", action="store_true",
                   help="also write each translation's word alignment to its source, in Pharaoh format "
                        "(JSON lines)")
    p.add_argument("--target-prefix", default=None, metavar="TEXT",
                   help="each translation starts with TEXT, and the model continues it")
    p.add_argument("--constraint", action="append", default=None, metavar="TEXT", dest="constraints",
                   help="each translation holds TEXT (terminology, as whole words); repeat it for several "
                        "(lexically constrained beam search: not with --beam-size 1 or sampling)")
    p.add_argument("--sampling-topk", type=int, default=None, metavar="K",
                   help="sample each token from the K most likely instead of searching (0: all)")
    p.add_argument("--sampling-topp", type=float, default=None, metavar="P",
                   help="sample each token from the most likely whose probabilities reach P")
    p.add_argument("--sampling-temperature", type=float, default=None, metavar="T",
                   help="sample with the log-probabilities divided by T")
    p.add_argument("--seed", type=int, default=None,
                   help="the sampling seed (default 0): with a sentence's own ids, it fixes its sample")


def output_options(args):
    """`(outputs, sampler)` of the command line: the outputs asked for
    (`n_best`, `alignments`; None for plain translations) and a
    `RandomSampler` if any sampling option is given."""
    outputs = None
    if args.scores or args.n_best > 1 or args.alignments:
        outputs = {"n_best": args.n_best, "alignments": args.alignments}
    given = {name: getattr(args, f"sampling_{name}") for name in ("topk", "topp", "temperature")}
    given = {name: value for name, value in given.items() if value is not None}
    if not given and args.seed is None:
        return outputs, None
    from keras_transformer.decoding.sampling import RandomSampler

    return outputs, RandomSampler(top_k=given.get("topk", 0), top_p=given.get("topp", 1.0),
                                  temperature=given.get("temperature", 1.0), seed=0 if args.seed is None else args.seed)


def load_translator(model, tokenizer=None, batch_size=None, quantize=None, **decoding):
    """A `Translator` of a preset (name or directory), a SavedModel folder,
    or a `.keras` file and its `tokenizer` file, with `decoding` options
    and `batch_size`, after `model.quantize(quantize)` if given (`"int8"`).

    A SavedModel's translator is the one it was traced from
    (`Translator.from_saved_model`): it decodes as exported, so `quantize`
    and `decoding` options are refused.
    """
    if quantize not in (None, "int8"):
        raise ValueError(f"--quantize takes 'int8'. Received: --quantize={quantize!r}")
    options = {} if batch_size is None else {"batch_size": batch_size}
    preset = preset_path(model)
    if preset is not None:
        from keras_transformer import SubwordTokenizer, presets

        no_tokenizer_with_preset(model, tokenizer)
        keras_model, sp = presets.load_model(preset), SubwordTokenizer.from_preset(preset)
    elif model.endswith(".keras"):
        keras_model, sp = load_keras_model(model), load_tokenizer(tokenizer)
    elif os.path.isdir(model):
        from keras_transformer import Translator

        if tokenizer is not None:
            raise ValueError(f"--tokenizer is for a .keras model or a run folder; the SavedModel {model!r} has its "
                             f"own tokenizer (assets/tokenizer.model). Received: --tokenizer={tokenizer!r}")
        no_options_with_saved_model(model, quantize=quantize, **decoding)
        return Translator.from_saved_model(model, **options)
    else:
        raise no_such_model(model)
    from keras_transformer import Translator

    if quantize:
        keras_model.quantize(quantize)
    return Translator(keras_model, sp, **decoding, **options)


def no_options_with_saved_model(model, **given):
    """A SavedModel decodes as it was exported: `--quantize` or a decoding
    option beside one is an error."""
    given = {name: value for name, value in given.items() if value is not None}
    if given:
        names = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        values = ", ".join(f"--{name.replace('_', '-')}" + ("" if value is True else f"={value!r}")
                           for name, value in given.items())
        raise ValueError(
            f"{names} applies to a preset or a .keras model; a SavedModel translates as it was "
            f"exported. Received: model={model!r}, {values}"
        )


def translate_function(model, tokenizer=None, batch_size=None, quantize=None, outputs=None, sampler=None,
                       target_prefix=None, constraints=None, **decoding):
    """`translate(sentences) -> translations` with the `Translator` of
    `load_translator`.

    With `outputs` (`{"n_best": ..., "alignments": ...}`), each translation
    is a dict of outputs (`keras_transformer.translator.prediction`), not a
    string. With `sampler`, a `RandomSampler`, translations are sampled.
    With `target_prefix`, a string, every translation starts with it;
    with `constraints`, a list of strings, every translation holds them.

    Returns `(translate, keras_model, tokenizer)`.
    """
    translator = load_translator(model, tokenizer, batch_size, quantize, **decoding)
    keras_model, sp = translator.model, translator.tokenizer
    from keras_transformer.translator import prediction

    if outputs is None and sampler is None and target_prefix is None and constraints is None:
        return translator.translate, keras_model, sp

    def steering(texts):
        """The call's sampler, and each sentence's prefix and constraints."""
        return dict(sampler=sampler, target_prefix=None if target_prefix is None else [target_prefix] * len(texts),
                    constraints=None if constraints is None else [list(constraints)] * len(texts))

    if outputs is None:
        return (lambda texts: translator.translate(texts, **steering(texts))), keras_model, sp
    def translate(texts):
        found = translator.hypotheses(texts, **steering(texts), **outputs)
        return [prediction(hypotheses, **outputs) for hypotheses in found]

    return translate, keras_model, sp


def set_tensorflow_process_options(intra_op_threads=0, inter_op_threads=0):
    """TensorFlow's thread pools for this command's whole process, before it
    loads a SavedModel (`serve`), as TF Serving's
    `--tensorflow_intra_op_parallelism` and
    `--tensorflow_inter_op_parallelism` (0: TensorFlow's choice, one thread
    per core each).

    Only a command makes them, for its own process; the library's functions
    never do.
    """
    from keras_transformer.validation import check_non_negative_int

    check_non_negative_int("intra_op_threads", intra_op_threads)
    check_non_negative_int("inter_op_threads", inter_op_threads)
    import tensorflow as tf

    threading = tf.config.threading
    for name, value, setter, getter in (
        ("intra_op_threads", intra_op_threads, threading.set_intra_op_parallelism_threads,
         threading.get_intra_op_parallelism_threads),
        ("inter_op_threads", inter_op_threads, threading.set_inter_op_parallelism_threads,
         threading.get_inter_op_parallelism_threads),
    ):
        if value and value != getter():
            try:
                setter(value)
            except RuntimeError as error:  # TensorFlow's runtime already started in this process
                raise RuntimeError(f"Cannot set `{name}`={value}: {error}") from error


# A file is read, sorted and translated a chunk at a time: the first chunk
# is one batch, so the output starts after one batch; each next chunk is
# twice as long, up to this many batches, which memory holds at most,
# whatever the file's length.
CHUNK_BATCHES = 16


def translate_chunks(translate, sentences, batch_size, progress=None):
    """Yields `(chunk, translations)` over the iterable `sentences`, in order.

    Reads one batch of sentences, then chunks twice as long, up to
    `CHUNK_BATCHES * batch_size` sentences. The distinct sentences of a
    chunk are translated once each (files repeat lines: interface strings,
    subtitles, logs), in batches of similar length: sorting by length first
    means a batch is padded to about its own sentences' length, not to that
    of the longest sentence of the chunk.

    >>> chunks = translate_chunks(lambda batch: [s.upper() for s in batch], ["a b c", "d", "a b c", "e f"], 2)
    >>> [translations for _, translations in chunks]
    [['A B C', 'D'], ['A B C', 'E F']]
    """
    sentences = iter(sentences)
    done, size = 0, batch_size
    while chunk := list(itertools.islice(sentences, size)):
        distinct = sorted(dict.fromkeys(chunk), key=len)
        translated = {}
        for start in range(0, len(distinct), batch_size):
            batch = distinct[start : start + batch_size]
            translated.update(zip(batch, translate(batch)))
            if progress:
                progress.update(done + len(chunk) * len(translated) // len(distinct))
        done += len(chunk)
        size = min(2 * size, CHUNK_BATCHES * batch_size)
        yield chunk, [translated[sentence] for sentence in chunk]


def translate_sorted(translate, sentences, batch_size, progress=None):
    """`translate_chunks`' translations of `sentences` as one list.

    >>> translate_sorted(lambda batch: [s.upper() for s in batch], ["a b c", "d", "e f"], 2)
    ['A B C', 'D', 'E F']
    """
    return [t for _, translations in translate_chunks(translate, sentences, batch_size, progress) for t in translations]
