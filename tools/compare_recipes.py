"""Training recipes side by side on a shipped corpus (by default the
LibreOffice help English->German): `small` with the paper's post-norm
layers, `tiny`, `small` with pre-norm layers (`--set norm_first=True`),
and `small` with 2 post-norm layers.

    python tools/compare_recipes.py [RECIPE ...] [--corpus NAME] [--steps 1200] [--output FILE]

Each trains with `keras-transformer train` on the corpus's training split
(2,048-token batches and steps, 1,000 warm-up steps, the loss on the first
600 validation pairs every 100 steps), one after another; then its last
weights translate the first 300 test sources (beam 4). Writes each run's
losses, BLEU, chrF and length ratio (hypothesis / reference length) to
benchmarks/results/<corpus>_recipes_cpu.json. How long each takes on CPU:
keras_transformer/zoo/libreoffice_en_de/README.md.

The runs of benchmarks/results/libreoffice_en_de_stall_cpu.json:
`--train-pairs 4000 --warmup-steps 200 --checkpoint-every 50 --steps 650
--no-score`, again with `--precision mixed_bfloat16`, and with
`--backend jax --precision mixed_bfloat16 --numpy-batches`.
"""

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys

RECIPES = {
    "small": ["--architecture", "small"],
    "tiny": ["--architecture", "tiny"],
    "small_pre_norm": ["--architecture", "small", "--set", "norm_first=True"],
    "small_two_layers": ["--architecture", "small", "--set", "num_layers=2"],
}
VALIDATION_PAIRS, TEST_SOURCES = 600, 300
EPOCH_LINE = re.compile(r"- loss: ([0-9.]+) .*- val_loss: ([0-9.]+)")


def write_tsv(path, pairs):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{source}\t{target}\n" for source, target in pairs)


# `train` in a process of its own; with `numpy` its data are NumPy batches,
# as on a machine without TensorFlow (`training_data`'s other path).
TRAIN = """import sys
import keras_transformer.training.training_data as data
if {numpy}:
    data._has_tensorflow = lambda: False
from keras_transformer.cli import main
sys.exit(main(sys.argv[1:]))
"""


def train(name, folder, args, train_file, valid_file):
    """The run's `[(step, training loss, validation loss)]`, from `fit`'s lines."""
    every = args.checkpoint_every
    argv = ["train", "--train-file", train_file, "--valid-file", valid_file, "--output-dir", folder,
            "--vocab-size", "8000", "--tokens-per-batch", "2048", "--tokens-per-step", "2048",
            "--train-steps", str(args.steps), "--warmup-steps", str(args.warmup_steps), "--checkpoint-every",
            str(every), "--keep-checkpoints", "1", "--precision", args.precision, "--fit-verbose", "2",
            "--no-tensorboard", *RECIPES[name]]
    run = subprocess.run([sys.executable, "-c", TRAIN.format(numpy=args.numpy_batches), *argv], check=True,
                         capture_output=True, text=True, env=dict(os.environ, KERAS_BACKEND=args.backend))
    losses = [tuple(map(float, m.groups())) for m in map(EPOCH_LINE.search, run.stdout.splitlines()) if m]
    return [(every * (i + 1), loss, val_loss) for i, (loss, val_loss) in enumerate(losses)]


def score(folder, corpus):
    from keras_transformer import Translator, datasets
    from keras_transformer.evaluation import corpus_bleu

    sources, references = datasets.load_references(corpus, "test")
    sources, references = sources[:TEST_SOURCES], references[:TEST_SOURCES]
    hypotheses = Translator.from_preset(folder, beam_size=4).translate(sources)
    bleu, _, chrf, _ = corpus_bleu(hypotheses, references)
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
            "length_ratio": round(bleu.sys_len / bleu.ref_len, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipes", nargs="*", default=list(RECIPES), help=f"some of {', '.join(RECIPES)}")
    parser.add_argument("--corpus", default="libreoffice_en_de", help="a shipped corpus")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--warmup-steps", type=int, default=1000)
    parser.add_argument("--checkpoint-every", type=int, default=100, help="steps between validations")
    parser.add_argument("--train-pairs", type=int, default=None, help="the first N training pairs, shuffled")
    parser.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16"])
    parser.add_argument("--backend", default="tensorflow", choices=["tensorflow", "jax", "torch"])
    parser.add_argument("--numpy-batches", action="store_true", help="NumPy batches instead of tf.data")
    parser.add_argument("--no-score", action="store_true", help="the losses only")
    parser.add_argument("--runs", default="runs/recipes")
    parser.add_argument("--output", help="default: benchmarks/results/<corpus>_recipes_cpu.json")
    args = parser.parse_args()
    unknown = [name for name in args.recipes if name not in RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}; choose from {list(RECIPES)}")
    from keras_transformer import datasets

    os.makedirs(args.runs, exist_ok=True)
    train_file, valid_file = os.path.join(args.runs, "train.tsv"), os.path.join(args.runs, "valid.tsv")
    pairs = datasets.load(args.corpus, "train")
    if args.train_pairs:
        random.Random(0).shuffle(pairs)
        pairs = pairs[: args.train_pairs]
    write_tsv(train_file, pairs)
    write_tsv(valid_file, datasets.load(args.corpus, "validation")[:VALIDATION_PAIRS])
    results = {"corpus": args.corpus, "training_pairs": len(pairs), "steps": args.steps, "tokens_per_step": 2048,
               "warmup_steps": args.warmup_steps, "validation_pairs": VALIDATION_PAIRS, "backend": args.backend,
               "precision": args.precision, "batches": "numpy" if args.numpy_batches else "tf.data",
               "machine": machine(), "runs": {}}
    if not args.no_score:
        results.update(test_sources=TEST_SOURCES, beam_size=4)
    for name in args.recipes:
        folder = os.path.join(args.runs, name)
        results["runs"][name] = {"arguments": RECIPES[name], "losses": train(name, folder, args, train_file,
                                                                             valid_file)}
        if not args.no_score:
            results["runs"][name].update(score(folder, args.corpus))
        print(name, json.dumps(results["runs"][name]), flush=True)
    with open(args.output or f"benchmarks/results/{args.corpus}_recipes_cpu.json", "w") as f:
        json.dump(results, f, indent=1)


def machine():
    """The CPU's model name and the cores this process may use."""
    names = [line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")]
    return f"{names[0] if names else platform.machine()}, {len(os.sched_getaffinity(0))} cores"


if __name__ == "__main__":
    main()
