"""What several commands share: argument types and loading a model to translate with.

A command's MODEL argument is any model `keras_transformer.translation.loading` reads:
a preset, a SavedModel folder, a `.keras` file, or a training run folder
with `--weights`.

Example:

>>> from keras_transformer.cli.common import translate_function
>>> translate, _, _ = translate_function("saved_models/tatoeba_en_fr")
>>> translate(["I love you."])
["Je t'aime."]
>>> translate, model, tokenizer = translate_function("tatoeba_en_fr")   # the shipped preset
"""

import argparse
import functools
import itertools


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


def add_model_argument(p):
    """The model a translating command reads: a preset, a SavedModel folder or a `.keras` file."""
    p.add_argument("model", help="a preset (a shipped name such as tatoeba_en_fr, or a preset directory), "
                                 "a SavedModel folder (saved_models/<name>) or a .keras file")


def add_decoding_arguments(p, batch_size=True):
    """The `Translator`'s decoding options, for a preset or a `.keras` model;
    unset, the `Translator`'s defaults (`keras_transformer.decoding.defaults`)."""
    from keras_transformer.decoding.common import LENGTH_PENALTIES
    from keras_transformer.decoding.defaults import ALPHA, BATCH_SIZE, BEAM_SIZE, STOP, STOP_RULES
    from keras_transformer.translation.preprocessor import LONG_INPUTS

    if batch_size:
        p.add_argument("--batch-size", type=positive_int, default=BATCH_SIZE, help="sentences per batch")
    p.add_argument("--beam-size", type=positive_int, default=None, help=f"1 decodes greedily (default: {BEAM_SIZE})")
    p.add_argument("--alpha", type=float, default=None, help=f"the length penalty's exponent (default: {ALPHA})")
    p.add_argument("--stop", choices=STOP_RULES, default=None,
                   help="when beam search is done with a sentence: exact (no alive hypothesis can beat its best "
                        "finished ones) or early (its best candidate has ended, as CTranslate2 stops; fewer steps) "
                        f"(default: {STOP})")
    p.add_argument("--length-penalty", choices=LENGTH_PENALTIES, default=None,
                   help="gnmt: ((5 + length) / 6) ** alpha (the default); huggingface: length ** alpha, and beam "
                        "search stops as Hugging Face's generate does (with --alpha 1, its defaults)")
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
    from keras_transformer.translation.translator import DECODING_OPTIONS

    return {name: getattr(args, name) for name in DECODING_OPTIONS if getattr(args, name, None) is not None}


def add_output_arguments(p):
    """What a translation returns, and sampling instead of the search
    (`Translator.hypotheses`, `keras_transformer.decoding.random_sampling`)."""
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
    given = {name: getattr(args, flag) for name, flag in (("top_k", "sampling_topk"), ("top_p", "sampling_topp"),
                                                          ("temperature", "sampling_temperature"))}
    given = {name: value for name, value in given.items() if value is not None}
    if not given:
        if args.seed is not None:
            raise ValueError("--seed applies to sampling: give --sampling-topk, --sampling-topp or "
                             "--sampling-temperature too (--sampling-temperature 1 samples from the whole "
                             f"distribution). Received: --seed {args.seed} without them")
        return outputs, None
    from keras_transformer.decoding.random_sampling import RandomSampler

    return outputs, RandomSampler(**given, **({} if args.seed is None else {"seed": args.seed}))


def load_translator(model, tokenizer=None, batch_size=None, quantize=None, **decoding):
    """`Translator.load` of MODEL (`keras_transformer.translation.loading`), with its
    `tokenizer` file, `batch_size`, `quantize` and `decoding` options."""
    from keras_transformer.translation.translator import Translator

    options = {} if batch_size is None else {"batch_size": batch_size}
    return Translator.load(model, tokenizer, quantize=quantize, **decoding, **options)


def translate_function(model, tokenizer=None, batch_size=None, quantize=None, outputs=None, sampler=None,
                       target_prefix=None, constraints=None, format="text", **decoding):
    """`translate(sentences) -> translations` with the `Translator` of
    `load_translator`.

    With `outputs` (`{"n_best": ..., "alignments": ...}`), each translation
    is a dict of outputs (`keras_transformer.translation.translator.prediction`), not a
    string. With `sampler`, a `RandomSampler`, translations are sampled.
    With `target_prefix`, a string, every translation starts with it;
    with `constraints`, a list of strings, every translation holds them.
    `format`, of `keras_transformer.translation.markup.FORMATS`: what the texts are.

    Returns `(translate, keras_model, tokenizer)`.
    """
    translator = load_translator(model, tokenizer, batch_size, quantize, **decoding)
    keras_model, sp = translator.model, translator.tokenizer
    from keras_transformer.translation.translator import prediction

    if outputs is not None and format != "text":
        raise ValueError(f"--format {format} writes translations only: not with --scores, --n-best or --alignments. "
                         f"Received: --format {format} with them")
    if outputs is None and sampler is None and target_prefix is None and constraints is None:
        return functools.partial(translator.translate, format=format), keras_model, sp

    def steering(texts):
        """The call's sampler, and each sentence's prefix and constraints."""
        return dict(sampler=sampler, target_prefix=None if target_prefix is None else [target_prefix] * len(texts),
                    constraints=None if constraints is None else [list(constraints)] * len(texts))

    if outputs is None:
        return (lambda texts: translator.translate(texts, **steering(texts), format=format)), keras_model, sp
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


def progress_bar(total, unit_name="sentence"):
    """A Keras progress bar of `total` units, drawn on standard error:
    standard output carries a command's results (`translate`, `evaluate`)."""
    import contextlib
    import sys

    import keras

    class Progbar(keras.utils.Progbar):  # Keras draws on sys.stdout
        def update(self, *args, **kwargs):
            with contextlib.redirect_stdout(sys.stderr):
                super().update(*args, **kwargs)

    with contextlib.redirect_stdout(sys.stderr):
        return Progbar(total, unit_name=unit_name)


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
