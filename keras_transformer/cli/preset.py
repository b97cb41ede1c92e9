"""`keras-transformer preset`: a training run's averaged checkpoints as a preset.

    keras-transformer preset runs/small --average 5 --weights-dtype float16 --output my_preset
    keras-transformer translate my_preset "Where is the station?"

The preset directory gets config.json, model.weights.h5 (the mean of the
run's newest `--average` intact checkpoints, section 6.1), tokenizer.model,
metadata.json (the steps averaged, the run's data) and, with
`--model-card`, README.md; `Transformer.from_preset(dir)` and
`Translator.from_preset(dir)` load it.
"""

import os
import tempfile

NAME = "preset"
HELP = "Turn a training run into a preset: averaged checkpoints, config, tokenizer."


def add_arguments(p):
    p.add_argument("run_dir", help="a `keras-transformer train` output directory (run.json, checkpoints/)")
    p.add_argument("--output", required=True, help="the preset directory to write")
    p.add_argument("--average", type=int, default=5,
                   help="average the newest N intact checkpoints (paper: 5 base, 20 big)")
    p.add_argument("--weights-dtype", default="float32", choices=["float32", "float16"],
                   help="float16 halves the bytes; the weights come back as float32 on loading")
    p.add_argument("--model-card", default=None, help="a Markdown file copied into the preset as README.md")


def run(args):
    from keras_transformer.data import SubwordTokenizer
    from keras_transformer.models.presets import save_model
    from keras_transformer.training.averaging import average_checkpoints
    from keras_transformer.translation.loading import load_keras_model, read_manifest

    if args.average < 1:
        raise ValueError(f"Argument `--average` must be >= 1. Received: --average={args.average}")
    manifest = read_manifest(args.run_dir) if os.path.isdir(args.run_dir) else None
    if manifest is None:
        raise FileNotFoundError(f"Argument `run_dir` is not a training run (no run.json). Received: {args.run_dir!r}")
    if os.path.isdir(args.output) and read_manifest(args.output) is not None:
        raise ValueError(
            "Argument `--output` is a training run's directory, whose last weights (model.weights.h5) the preset "
            "would replace: write the preset to a directory of its own. "
            f"Received: run_dir={args.run_dir!r}, --output={args.output!r}"
        )
    tokenizer = os.path.join(args.run_dir, "tokenizer.model")
    if not os.path.isfile(tokenizer):
        raise FileNotFoundError(f"The run has no tokenizer.model (a synthetic corpus?). Received: {args.run_dir!r}")
    model_card = None
    if args.model_card is not None:
        with open(args.model_card, encoding="utf-8") as f:
            model_card = f.read()
    with tempfile.TemporaryDirectory() as scratch:
        averaged = os.path.join(scratch, "average.weights.h5")
        paths = average_checkpoints(os.path.join(args.run_dir, "checkpoints"), averaged, last=args.average)
        model = load_keras_model(args.run_dir, averaged)
    identity = manifest.get("identity", manifest)
    metadata = {"data": identity.get("data"), "averaged_checkpoints": [os.path.basename(p) for p in paths]}
    save_model(model, args.output, weights_dtype=args.weights_dtype, model_card=model_card, metadata=metadata)
    SubwordTokenizer.load(args.run_dir).save_to_preset(args.output)  # an imported model's two, if so
    print(f"Wrote preset {args.output} ({len(paths)} checkpoint(s) averaged: {', '.join(map(os.path.basename, paths))})")
    return 0
