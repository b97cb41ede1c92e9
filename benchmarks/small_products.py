"""TensorFlow's matrix products at decoding's shapes: oneDNN against Eigen.

    python benchmarks/small_products.py --rounds 3 --output /tmp/small_products.json

TensorFlow runs a `MatMul` (with its bias, as a `Dense` layer's) on oneDNN
where `TF_ENABLE_ONEDNN_OPTS` turns it on (by default on CPUs with AVX-512
VNNI, bfloat16 or AMX; `tensorflow.python.util._pywrap_util_port.IsMklEnabled`
says), else on Eigen. A decoding step multiplies a few rows (the beams of
the sentences still decoding) by each weight matrix. For each shape `rows x
inputs x outputs` of `--shapes` (by default `tatoeba_en_fr`'s: d_model 256,
d_ff 1024, 5,000 tokens; 4 rows for one sentence, 256 for 64), a process
with each setting times `--products` products in one graph loop (`x @ W +
b`, `W` a variable, as the SavedModel reads its weights), the settings
taking turns in `--rounds` rounds: microseconds a product, in wall time and
in the process's CPU time, their medians, and Eigen's as a multiple of
oneDNN's. Pinned to `--threads` CPUs, with that many TensorFlow threads.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, load_average, pin_to_cores, uptime, write_json  # noqa: E402

SHAPES = ("4x256x768", "4x256x256", "4x256x1024", "4x1024x256", "4x256x5000",
          "256x256x768", "256x256x1024", "256x1024x256", "256x256x5000")
SETTINGS = {"onednn": "1", "eigen": "0"}


def worker(args):
    pin_to_cores(args.threads)
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    rng = np.random.default_rng(0)
    found = {"onednn_enabled": bool(_pywrap_util_port.IsMklEnabled()), "us": {}, "cpu_us": {}}
    for shape in args.shapes:
        rows, inputs, outputs = map(int, shape.split("x"))
        weight = tf.Variable(rng.normal(size=(inputs, outputs)).astype("float32"))
        bias = tf.Variable(np.zeros(outputs, "float32"))
        x = tf.constant(rng.normal(size=(rows, inputs)).astype("float32"))

        @tf.function(autograph=False)
        def products(x):
            def body(i, total):
                y = tf.nn.bias_add(tf.matmul(x + tf.cast(i, tf.float32) * 1e-9, weight), bias)
                return i + 1, total + y[0, 0]
            return tf.while_loop(lambda i, _: i < args.products, body, (0, 0.0))[1]

        products(x).numpy()
        start, start_cpu = time.perf_counter(), time.process_time()
        products(x).numpy()
        found["us"][shape] = 1e6 * (time.perf_counter() - start) / args.products
        found["cpu_us"][shape] = 1e6 * (time.process_time() - start_cpu) / args.products
    with open(args.worker_output, "w") as f:
        json.dump(found, f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), help="rows x inputs x outputs")
    parser.add_argument("--products", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default=None)
    parser.add_argument("--worker-output", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker_output:
        return worker(args)
    runs = {name: [] for name in SETTINGS}
    uptime_before = uptime()
    output = os.path.join(os.path.abspath(os.path.dirname(args.output or ".")), f".small_products_{os.getpid()}.json")
    try:
        for round_ in range(args.rounds):
            for name in (list(SETTINGS) if round_ % 2 == 0 else list(SETTINGS)[::-1]):
                env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=SETTINGS[name], TF_CPP_MIN_LOG_LEVEL="3",
                           CUDA_VISIBLE_DEVICES="")
                load = load_average()
                subprocess.run([sys.executable, os.path.abspath(__file__), "--worker-output", output, "--threads",
                                str(args.threads), "--products", str(args.products), "--shapes", *args.shapes],
                               env=env, check=True)
                with open(output) as f:
                    runs[name].append({**json.load(f), "load_average_before": load})
    finally:
        if os.path.exists(output):
            os.remove(output)
    table = {}
    print(f"{'shape':>14s} {'oneDNN us':>10s} {'Eigen us':>10s} {'Eigen/oneDNN':>13s} {'CPU oneDNN':>11s} "
          f"{'CPU Eigen':>10s} {'CPU ratio':>10s}")
    for shape in args.shapes:
        row = {f"{name}_{kind}": float(np.median([r[kind][shape] for r in runs[name]]))
               for name in SETTINGS for kind in ("us", "cpu_us")}
        row.update(eigen_over_onednn=row["eigen_us"] / row["onednn_us"],
                   eigen_over_onednn_cpu=row["eigen_cpu_us"] / row["onednn_cpu_us"])
        table[shape] = row
        print(f"{shape:>14s} {row['onednn_us']:10.1f} {row['eigen_us']:10.1f} {row['eigen_over_onednn']:12.2f}x "
              f"{row['onednn_cpu_us']:11.1f} {row['eigen_cpu_us']:10.1f} {row['eigen_over_onednn_cpu']:9.2f}x")
    report = {"benchmark": "small_products", "command": " ".join(
                  ["python", "benchmarks/small_products.py"] + list(sys.argv[1:] if argv is None else argv)),
              "machine": {"cpu": cpu_name(), "cpu_flags": cpu_flags(), "cpu_count": os.cpu_count(),
                          "threads": args.threads},
              "onednn_enabled": {name: runs[name][0]["onednn_enabled"] for name in SETTINGS},
              "uptime_before": uptime_before, "uptime_after": uptime(),
              "products": args.products, "rounds": args.rounds, "shapes": table, "runs": runs}
    if args.output:
        write_json(args.output, report)
    return report


if __name__ == "__main__":
    main()
