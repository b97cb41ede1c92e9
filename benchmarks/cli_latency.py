"""One sentence through `keras-transformer translate`, from a fresh process.

Runs the command as a user does, `--repeats` times for each model, and
reports the wall time of each process from its start to its exit (Python,
TensorFlow and the package imported, the model loaded, the sentence
translated and printed), with the median. The models are a shipped preset
and, with `--saved-model`, a SavedModel folder
(`keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr`
makes the default one).

    python benchmarks/cli_latency.py --output benchmarks/results/cli_latency_cpu.json
"""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_name, write_json  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--preset", default="tatoeba_en_fr")
parser.add_argument("--saved-model", default=os.path.join("saved_models", "tatoeba_en_fr"),
                    help="a SavedModel folder; left out if it does not exist")
parser.add_argument("--sentence", default="Where is the station?")
parser.add_argument("--repeats", type=int, default=5)
parser.add_argument("--output", default=None, help="a JSON file for the results")


def command_line():
    """The installed `keras-transformer` script beside this Python."""
    script = shutil.which("keras-transformer", path=os.path.dirname(sys.executable))
    if script is None:
        raise SystemExit("keras-transformer is not installed beside this Python: pip install -e .")
    return script


def time_process(argv):
    """`(seconds, stdout)` of one run of `argv` to its exit."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return seconds, done.stdout.strip()


def main(argv=None):
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1. Received: {args.repeats}")
    script = command_line()
    models = [args.preset] + ([args.saved_model] if os.path.isdir(os.path.join(ROOT, args.saved_model)) else [])
    results = []
    for model in models:
        runs = [time_process([script, "translate", model, args.sentence]) for _ in range(args.repeats)]
        seconds = [s for s, _ in runs]
        results.append({"model": model, "seconds": [round(s, 2) for s in seconds],
                        "median_s": round(statistics.median(seconds), 2), "output": runs[-1][1]})
        print(f"{model:40s} median {statistics.median(seconds):6.2f} s  "
              f"runs {' '.join(f'{s:.2f}' for s in seconds)}  -> {runs[-1][1]}")
    report = {"benchmark": "cli_latency", "sentence": args.sentence, "repeats": args.repeats,
              "cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
              "results": results}
    if args.output:
        write_json(args.output, report)
    return report


if __name__ == "__main__":
    main()
