"""One sentence through `keras-transformer translate`, from a fresh process.

Runs the command as a user does, `--repeats` times for each model, and
reports the wall time of each process from its start to its exit (Python,
TensorFlow and the package imported, the model loaded, the sentence
translated and printed), with the median. The models are a shipped preset
and, with `--saved-model`, a SavedModel folder
(`keras-transformer export tatoeba_en_fr --output-dir saved_models/tatoeba_en_fr`
makes the default one). Beside them, `python -c "import tensorflow"` is
timed the same way: the part of each run that is TensorFlow's import. The
processes take turns, one of each per repeat, so that a busy machine weighs
on all of them alike.

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

IMPORT_TENSORFLOW = "python -c 'import tensorflow'"

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
    probes = {IMPORT_TENSORFLOW: [sys.executable, "-c", "import tensorflow"]}
    probes.update({model: [script, "translate", model, args.sentence] for model in models})
    runs = {name: [] for name in probes}
    for _ in range(args.repeats):
        for name, argv in probes.items():
            runs[name].append(time_process(argv))
    for name in probes:
        seconds = [s for s, _ in runs[name]]
        print(f"{name:40s} median {statistics.median(seconds):6.2f} s  "
              f"runs {' '.join(f'{s:.2f}' for s in seconds)}  -> {runs[name][-1][1]}")
    summary = {name: {"seconds": [round(s, 2) for s, _ in runs[name]],
                      "median_s": round(statistics.median(s for s, _ in runs[name]), 2)} for name in probes}
    results = [{"model": model, **summary[model], "output": runs[model][-1][1]} for model in models]
    report = {"benchmark": "cli_latency", "sentence": args.sentence, "repeats": args.repeats,
              "cpu": cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
              "import_tensorflow": summary[IMPORT_TENSORFLOW], "results": results}
    if args.output:
        write_json(args.output, report)
    return report


if __name__ == "__main__":
    main()
