"""`keras-transformer export`: a trained model as a SavedModel that translates strings.

    keras-transformer export runs/small/model.keras --tokenizer runs/small/tokenizer.model \
        --output-dir saved_models/mine --metadata '{"bleu": 50.1}'
    keras-transformer export runs/small --weights runs/small/average.weights.h5 \
        --tokenizer runs/small/tokenizer.model --output-dir saved_models/mine

The version folder (TF Serving's layout) goes inside `--output-dir`.
"""

import json

from keras_transformer.cli.common import load_keras_model

NAME = "export"
HELP = "Export a trained model as a SavedModel that translates strings (TF Serving layout)."


def add_arguments(p):
    p.add_argument("model", help="the trained model: a .keras file, or a training run folder with --weights")
    p.add_argument("--weights", help="with a run folder: the .weights.h5 to export (e.g. averaged checkpoints)")
    p.add_argument("--tokenizer", required=True, help="its SentencePiece .model file")
    p.add_argument("--output-dir", required=True, help="saved_models/<name>; the version folder goes inside")
    p.add_argument("--version", type=int, default=None, help="default: one more than the highest there")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty exponent")
    p.add_argument("--max-extra-length", type=int, default=50, help="output length limit: input length + this")
    p.add_argument("--n-best", type=int, default=1)
    p.add_argument("--buckets", type=int, nargs="+", default=None,
                   help="source lengths the graph pads to, one graph branch each (default: 16 32 64 128 "
                        "and the longest input); fewer buckets, a smaller SavedModel")
    p.add_argument("--metadata", default=None,
                   help='a JSON object added to assets.extra/metadata.json, e.g. \'{"bleu": 50.1}\'')


def run(args):
    from keras_transformer.export import DEFAULT_BUCKETS, export

    metadata = None if args.metadata is None else parse_metadata(args.metadata)
    model = load_keras_model(args.model, args.weights)
    path = export(
        model, args.tokenizer, args.output_dir, version=args.version, beam_size=args.beam_size,
        alpha=args.alpha, max_extra_length=args.max_extra_length, n_best=args.n_best,
        buckets=tuple(args.buckets or DEFAULT_BUCKETS), metadata=metadata,
    )
    print(f"Exported {path}")
    return 0


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
