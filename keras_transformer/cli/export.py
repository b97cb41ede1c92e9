"""`keras-transformer export`: a trained model as a SavedModel that translates strings, or for CTranslate2.

    keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr --buckets 16 32 64
    keras-transformer export my_preset --output-dir saved_models/mine      # a preset directory
    keras-transformer export runs/small --output-dir saved_models/mine      # a finished run is a preset
    keras-transformer export runs/small --weights runs/small/average.weights.h5 \
        --output-dir saved_models/mine --metadata '{"bleu": 50.1}'     # a run folder with other weights
    keras-transformer export my_model.keras --tokenizer my_tokenizer.model --output-dir saved_models/mine

The version folder (TF Serving's layout) goes inside `--output-dir`. A
preset (a shipped name or a preset directory) brings its own tokenizer;
its name and its metadata.json go into the SavedModel's
`assets.extra/metadata.json` (as `preset` and `preset_metadata`), beside
the decoding settings and `--metadata`. A run folder with `--weights` uses
its own tokenizer.model unless `--tokenizer` names one; a `.keras` file
needs `--tokenizer`. TF Serving's warm-up requests (`--warmup-batch-sizes`,
`--no-warmup`) go into `assets.extra/tf_serving_warmup_requests`.
`--signatures details sample score` adds those signatures beside
`serving_default` (docs/decoding.md).

`--format ctranslate2` writes a CTranslate2 model folder instead (the
`ctranslate2` extra): the model, its tokenizer, and a note on translating
as this package does, with CTranslate2's length penalty closest to
`--alpha` (`keras_transformer.converters.ctranslate2.export_ctranslate2`).
`--output-dir` is that folder; `--quantize int8` stores int8 weights:

    keras-transformer export tatoeba_en_fr --format ctranslate2 --output-dir ct2/tatoeba_en_fr

Export int8 with XLA: without `--jit-compile`, Keras' int8 layers quantize
their inputs op by op (benchmarks/README.md: tried and dropped). A SavedModel
under XLA, int8, its batches narrowing as sentences finish, is an option, not
the default export (benchmarks/README.md: tried and dropped): TF Serving runs it only
with `--xla_cpu_compilation_enabled=true`, and its load compiles each bucket
for each batch size listed (minutes):

    keras-transformer export tatoeba_en_fr --output-dir exported/tatoeba_en_fr_xla --buckets 16 32 64 \
        --quantize int8 --jit-compile --narrow-batches --warmup-batch-sizes 1 2 4 8 16 32 64
"""

import json

from keras_transformer.cli.common import add_decoding_arguments, decoding_options
from keras_transformer.decoding.defaults import ALPHA, BEAM_SIZE, MAX_EXTRA_LENGTH
from keras_transformer.export.saved_model import SIGNATURES
from keras_transformer.models import presets
from keras_transformer.translation import loading
from keras_transformer.translation.preprocessor import DEFAULT_BUCKETS

NAME = "export"
HELP = ("Export a preset or a trained model as a SavedModel that translates strings (TF Serving layout), or as a "
        "CTranslate2 model.")
FORMATS = ("saved_model", "ctranslate2")

# The options of the SavedModel's graph, which a CTranslate2 model has no place for.
SAVED_MODEL_OPTIONS = ("version", "stop", "long_inputs", "narrow_batches", "max_extra_length", "buckets", "n_best",
                       "signatures", "jit_compile", "parallel_loops", "warmup_batch_sizes", "no_warmup")


def add_arguments(p):
    p.add_argument("model", help="a preset (a shipped name such as tatoeba_en_fr, or a preset directory), "
                                 "a .keras file, or a training run folder with --weights")
    p.add_argument("--weights", help="with a run folder: the .weights.h5 to export (e.g. averaged checkpoints)")
    p.add_argument("--tokenizer", help="its SentencePiece .model file (required with a .keras file)")
    p.add_argument("--format", choices=FORMATS, default="saved_model",
                   help="saved_model: a SavedModel; ctranslate2: a CTranslate2 model folder with its tokenizer and a note")
    p.add_argument("--output-dir", required=True,
                   help="saved_models/<name>, where the version folder goes; with --format ctranslate2, the new "
                        "model folder")
    p.add_argument("--version", type=int, default=None, help="default: one more than the highest there")
    add_decoding_arguments(p, batch_size=False)
    p.add_argument("--max-extra-length", type=int, default=None,
                   help=f"output length limit: input length + this (default: {MAX_EXTRA_LENGTH})")
    p.add_argument("--buckets", type=int, nargs="+", default=None,
                   help="source lengths the graph pads to, one graph branch each (default: "
                        f"{' '.join(map(str, DEFAULT_BUCKETS))}, capped at the model's source budget); fewer "
                        "buckets, a smaller SavedModel")
    p.add_argument("--n-best", type=int, default=None,
                   help="also return the N best translations (serving_default and details signatures)")
    p.add_argument("--signatures", nargs="*", choices=SIGNATURES, default=None,
                   help="signatures besides serving_default (default: none): details (confidences, alignments), "
                        "sample (sampling), score (scoring given translations), steer (target prefixes and "
                        "terminology constraints); each is another graph to trace at export")
    p.add_argument("--jit-compile", action="store_true",
                   help="compile each bucket's beam search with XLA, once per new batch shape (TF Serving "
                        "needs --xla_cpu_compilation_enabled=true); export --quantize int8 with it: without XLA, "
                        "Keras' int8 layers quantize their inputs op by op")
    p.add_argument("--parallel-loops", type=int, default=None, metavar="N",
                   help="without --jit-compile: decode a bucket's sentences as N loops that TensorFlow runs side "
                        "by side (default: 2; 1 with --jit-compile)")
    p.add_argument("--warmup-batch-sizes", type=int, nargs="+", default=None, metavar="N",
                   help="TF Serving's warm-up requests (assets.extra/tf_serving_warmup_requests): one per bucket "
                        "and batch size, replayed at load by TF Serving and serve (default: 1); with "
                        "--jit-compile, list the batch sizes clients send")
    p.add_argument("--no-warmup", action="store_true", help="write no warm-up requests")
    p.add_argument("--metadata", default=None,
                   help='a JSON object added to assets.extra/metadata.json, e.g. \'{"bleu": 50.1}\'')


def run(args):
    metadata = {} if args.metadata is None else parse_metadata(args.metadata)
    if args.format == "ctranslate2":
        from keras_transformer.converters.ctranslate2 import require_ctranslate2

        no_saved_model_options(args)
        require_ctranslate2()
    model, tokenizer, preset_metadata = load_model_and_tokenizer(args)
    if preset_metadata is not None:
        metadata = {"preset": args.model, "preset_metadata": preset_metadata, **metadata}
    if args.format == "ctranslate2":
        path = write_ctranslate2_folder(model, tokenizer, args, metadata)
    else:
        path = write_saved_model_folder(model, tokenizer, args, metadata)
    print(f"Exported {path}")
    return 0


def write_saved_model_folder(model, tokenizer, args, metadata):
    from keras_transformer.export import export

    if args.quantize:
        model.quantize(args.quantize)
        metadata = {"quantize": args.quantize, **metadata}
    return export(
        model, tokenizer, args.output_dir, **decoding_options(args), version=args.version,
        n_best=1 if args.n_best is None else args.n_best, metadata=metadata or None, jit_compile=args.jit_compile,
        parallel_loops=args.parallel_loops,
        warmup_batch_sizes=() if args.no_warmup else tuple(args.warmup_batch_sizes or [1]),
        signatures=tuple(args.signatures or ()),
    )


def write_ctranslate2_folder(model, tokenizer, args, metadata):
    """The CTranslate2 model folder; `--quantize int8` is CTranslate2's own
    int8 storage of the float weights."""
    from keras_transformer.converters import ctranslate2
    from keras_transformer.translation.tokenizer import SubwordTokenizer

    if not isinstance(tokenizer, SubwordTokenizer):
        tokenizer = SubwordTokenizer.load(tokenizer)
    return ctranslate2.export_ctranslate2(
        model, tokenizer, args.output_dir, beam_size=args.beam_size or BEAM_SIZE,
        alpha=ALPHA if args.alpha is None else args.alpha, quantization=args.quantize, metadata=metadata or None,
        length_penalty=args.length_penalty or "gnmt",
    )


def no_saved_model_options(args):
    """The SavedModel's graph options beside `--format ctranslate2` are an error naming them."""
    given = [name for name in SAVED_MODEL_OPTIONS if getattr(args, name, None) not in (None, False)]
    if given:
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        verb = "applies" if len(given) == 1 else "apply"
        raise ValueError(f"{flags} {verb} to a SavedModel; a CTranslate2 model has no graph to set it in. "
                         f"Received: --format ctranslate2, {flags}")


def load_model_and_tokenizer(args):
    """`(model, tokenizer, preset_metadata)` for MODEL (`keras_transformer.translation.loading`);
    the metadata is None unless MODEL is a preset."""
    kind = loading.model_kind(args.model, args.weights)
    if kind == loading.SAVED_MODEL:
        raise ValueError(f"{args.model!r} is a SavedModel folder, exported already: export a preset, a .keras file "
                         f"or a run folder with --weights. Received: model={args.model!r}")
    model, tokenizer = loading.load_model(args.model, args.tokenizer, args.weights)
    metadata = presets.load_metadata(loading.preset_path(args.model)) if kind == loading.PRESET else None
    return model, tokenizer, metadata


def parse_metadata(text):
    """`--metadata` as a dict; anything but a JSON object ends the command.

    >>> parse_metadata('{"bleu": 50.1}')
    {'bleu': 50.1}
    """
    try:
        metadata = json.loads(text)
    except ValueError as error:
        raise SystemExit(f"--metadata must be a JSON object ({error}). Received: {text!r}")
    if not isinstance(metadata, dict):
        raise SystemExit(f"--metadata must be a JSON object. Received: {text!r}")
    return metadata
