"""Where a TensorFlow decoding step spends its time: a profile by op type.

    python benchmarks/decode_profile.py --output benchmarks/results/decode_profile_cpu.json
    python benchmarks/decode_profile.py --engine savedmodel --saved-model saved_models/tatoeba_en_fr/1

The default `Translator` on TensorFlow (`--engine translator`, its graph
without XLA) or an exported SavedModel's `serving_default` (`--engine
savedmodel`) translates the first `--limit` test sources of `--preset`'s
corpus, sorted by length, in batches of `--batch-size`, under
`tf.profiler` with every op traced; then the first `--sentences` sources,
one at a time. Each pass runs once untimed first, so that graphs are traced
and the Translator has left its eager start. TensorFlow gets `--threads`
intra- and inter-op threads and the process as many CPUs.

Per pass, the JSON gives:
- `wall_s`: the pass's seconds under the profiler (which slows it);
- `op_cpu_s`: the ops' own time summed; `ops_running_s`: the time in which
  at least one op ran, on any thread; `between_ops_s`: the rest of the
  wall time, when no op ran (the executor between ops, Python, the
  profiler's own cost);
- `steps`: decoding steps run, summed over the loops (each loop's
  iterations: the commonest count among its body's ops), and per
  sentence; `ms_per_step`: the wall, op and between-ops time over them;
- `op_runs` and `ops_per_step`: the ops run inside the decoding loops
  (bodies and conditions), over the steps;
- `by_type`: each op type's runs, milliseconds of CPU (the op's own
  time, on any thread) and microseconds a run, all ops of the pass;
- `top_nodes`: the 30 costliest nodes, their layer numbers dropped;
- `by_part`: the same time split by what the op belongs to: the decoder's
  `self_attention`, `cross_attention`, `feed_forward`, `layer_norm`, the
  `output_projection`, `embedding` (with the positions), the rest of a
  step (`search`: the sampler, cache reordering, the loop's bookkeeping),
  and what runs outside the loops (`outside`: tokenizing, encoding).

Also the decoding graph's size: the nodes of each loop body (how many are
`Const`, and the nodes with those of the functions it calls, a `cond`'s
branches), and for a SavedModel the bytes of `saved_model.pb`.
"""

import argparse
import collections
import glob
import json
import os
import platform
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, load_average, pin_to_cores, write_json  # noqa: E402

# The parts of a decoding step, by the scope of an op's node name; first match wins.
PARTS = (
    ("self_attention_norm", "layer_norm"),
    ("cross_attention_norm", "layer_norm"),
    ("feed_forward_norm", "layer_norm"),
    ("decoder_norm", "layer_norm"),
    ("self_attention", "self_attention"),
    ("cross_attention", "cross_attention"),
    ("feed_forward", "feed_forward"),
    ("output_projection", "output_projection"),
    ("embedding", "embedding"),
    ("decoder_positions", "embedding"),
)
_LOOP = re.compile(r"^(.*?/while/(?:body|cond)/_\d+/)")


def part_of(node):
    """What a node of the decoding loop belongs to (`PARTS`), else "search"."""
    for scope, part in PARTS:
        if scope in node:
            return part
    return "search"


def read_ops(logdir):
    """`[(node name, op type, picoseconds, start)]` of every op the profile
    recorded, `start` in picoseconds on the profile's clock."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))[0], "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    ops = []
    for line in plane.lines:
        if not line.name.startswith("tf_Compute") and line.name != "python":
            continue
        for event in line.events:
            name = plane.event_metadata[event.metadata_id].name
            node, _, kind = name.rpartition(":")
            if node and not node.endswith(":") and kind and " " not in kind and "/" not in kind:
                ops.append((node, kind, event.duration_ps, line.timestamp_ns * 1000 + event.offset_ps))
    return ops


def summarise(ops, wall_s, sentences):
    """The pass's figures (module docstring) from its `read_ops`."""
    by_type, by_part = collections.defaultdict(lambda: [0, 0]), collections.Counter()
    by_node = collections.defaultdict(lambda: [0, 0])
    loops = collections.defaultdict(collections.Counter)  # loop -> node -> runs
    in_loops = 0
    for node, kind, ps, _ in ops:
        by_type[kind][0] += 1
        by_type[kind][1] += ps
        loop = _LOOP.match(node)
        short = node if loop is None else "loop/" + node[len(loop.group(1)):]
        by_node[(re.sub(r"_\d+(?=/|$)", "", short), kind)][0] += 1
        by_node[(re.sub(r"_\d+(?=/|$)", "", short), kind)][1] += ps
        if loop is None:
            by_part["outside"] += ps
            continue
        in_loops += 1
        if "/while/body/" in loop.group(1):
            loops[loop.group(1)][node] += 1
        by_part[part_of(node[len(loop.group(1)):])] += ps
    steps = sum(collections.Counter(runs.values()).most_common(1)[0][0] for runs in loops.values())
    total = sum(op[2] for op in ops)
    busy = busy_ps(ops)
    per_step = (lambda seconds: round(1000 * seconds / steps, 3)) if steps else (lambda seconds: None)
    return {
        "sentences": sentences,
        "wall_s": round(wall_s, 3),
        "op_cpu_s": round(total / 1e12, 3),
        "ops_running_s": round(busy / 1e12, 3),
        "between_ops_s": round(wall_s - busy / 1e12, 3),
        "steps": steps,
        "steps_per_sentence": round(steps / sentences, 2),
        "ms_per_step": {"wall": per_step(wall_s), "op_cpu": per_step(total / 1e12),
                        "between_ops": per_step(wall_s - busy / 1e12)},
        "op_runs": in_loops,
        "ops_per_step": round(in_loops / steps, 1) if steps else None,
        "by_type": {kind: {"runs": runs, "ms": round(ps / 1e9, 2), "us_per_run": round(ps / 1e6 / runs, 1),
                           "share": round(ps / total, 4)}
                    for kind, (runs, ps) in sorted(by_type.items(), key=lambda item: -item[1][1])},
        "top_nodes": [{"node": node, "type": kind, "runs": runs, "ms": round(ps / 1e9, 2)}
                      for (node, kind), (runs, ps) in sorted(by_node.items(), key=lambda item: -item[1][1])[:30]],
        "by_part": {part: {"ms": round(ps / 1e9, 2), "share": round(ps / total, 4)}
                    for part, ps in by_part.most_common()},
    }


def busy_ps(ops):
    """Picoseconds in which at least one op ran, on any thread: the pass's
    wall time less this is the time between ops (the executor's own work,
    Python, waiting)."""
    busy, end = 0, None
    for start, stop in sorted((op[3], op[3] + op[2]) for op in ops):
        if end is None or start > end:
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    return busy


def profile(translate, batches, sentences_count):
    """Runs `batches` once untimed, then under the profiler; the pass's figures."""
    import tensorflow as tf

    for batch in batches:
        translate(batch)
    logdir = tempfile.mkdtemp(prefix="decode_profile-")
    options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3)
    tf.profiler.experimental.start(logdir, options=options)
    start = time.perf_counter()
    for batch in batches:
        translate(batch)
    wall_s = time.perf_counter() - start
    tf.profiler.experimental.stop()
    return summarise(read_ops(logdir), wall_s, sentences_count)


def loop_bodies(graph_def):
    """`[{"nodes", "const", "nodes_with_calls"}]` of each while loop body in
    a GraphDef's function library: its own nodes, how many are `Const`, and
    its nodes with those of every function it calls (a `cond`'s branches)."""
    functions = {f.signature.name: f for f in graph_def.library.function}

    def called(function):
        for node in function.node_def:
            for value in node.attr.values():
                if value.HasField("func") and value.func.name in functions:
                    yield value.func.name

    def with_calls(name, seen):
        if name in seen:
            return 0
        seen.add(name)
        return len(functions[name].node_def) + sum(with_calls(c, seen) for c in called(functions[name]))

    bodies = set()
    for node in [n for f in functions.values() for n in f.node_def] + list(graph_def.node):
        if node.op in ("While", "StatelessWhile"):
            bodies.add(node.attr["body"].func.name)
    return [{"nodes": len(functions[b].node_def), "const": sum(n.op == "Const" for n in functions[b].node_def),
             "nodes_with_calls": with_calls(b, set())}
            for b in sorted(bodies) if b in functions]


def translator_engine(args):
    import tensorflow as tf

    from keras_transformer import Translator

    # The graph from the first call: its steady state is what is profiled.
    translator = Translator.from_preset(args.preset, batch_size=args.batch_size, eager_steps=0)
    translate = translator.translate
    decode = translator.runner.decoder(translator.sampler)
    source = tf.TensorSpec([None, None], tf.int32)
    graph = tf.function(lambda s: decode(s), input_signature=[source], autograph=False).get_concrete_function()
    return translate, {"loop_bodies": loop_bodies(graph.graph.as_graph_def())}


def savedmodel_engine(args):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer ops
    from tensorflow.core.protobuf import saved_model_pb2

    start = time.perf_counter()
    signature = tf.saved_model.load(args.saved_model).signatures["serving_default"]
    load_s = time.perf_counter() - start

    def translate(texts):
        return [t.decode("utf-8") for t in signature(inputs=tf.constant(texts))["translations"].numpy()]

    path = os.path.join(args.saved_model, "saved_model.pb")
    proto = saved_model_pb2.SavedModel()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    bodies = loop_bodies(proto.meta_graphs[0].graph_def)
    return translate, {"load_s": round(load_s, 2), "saved_model_pb_bytes": os.path.getsize(path),
                       "loop_bodies": bodies}


PASSES = ("sorted_batches", "one_sentence")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("translator", "savedmodel"), default="translator")
    parser.add_argument("--preset", default="tatoeba_en_fr")
    parser.add_argument("--saved-model", default=os.path.join(ROOT, "saved_models", "tatoeba_en_fr", "1"))
    parser.add_argument("--limit", type=int, default=640, help="the first N test sources, sorted by length")
    parser.add_argument("--sentences", type=int, default=50, help="the first N test sources, one at a time")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--passes", nargs="+", choices=PASSES, default=list(PASSES))
    parser.add_argument("--checkout", default=None,
                        help="import keras_transformer from this folder (another commit's files), not this one's")
    parser.add_argument("--output", default=None)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.checkout:  # before this checkout, which the module put first
        sys.path.insert(0, os.path.abspath(args.checkout))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    pin_to_cores(args.threads)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from keras_transformer import SubwordTokenizer, datasets

    translate, graph = (translator_engine if args.engine == "translator" else savedmodel_engine)(args)
    sources = datasets.load_references(args.preset, "test")[0]
    tokenizer = SubwordTokenizer.from_preset(args.preset)
    chosen = sources[: args.limit]
    lengths = [len(ids) for ids in tokenizer.encode(chosen)]
    order = sorted(range(len(chosen)), key=lambda i: (lengths[i], i))
    batches = [[chosen[i] for i in order[s : s + args.batch_size]] for s in range(0, len(order), args.batch_size)]
    singles = [[s] for s in sources[: args.sentences]]
    result = {
        "command": " ".join([os.path.basename(sys.argv[0])] + (sys.argv[1:] if argv is None else list(argv))),
        "engine": args.engine,
        "preset": args.preset,
        "package": os.path.dirname(os.path.abspath(sys.modules["keras_transformer"].__file__)),
        "machine": {"cpu": cpu_name(), "cpu_flags": cpu_flags(), "threads": args.threads,
                    "python": platform.python_version(), "tensorflow": tf.__version__,
                    "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
                    "load_average_before": load_average()},
        "graph": graph,
    }
    if "sorted_batches" in args.passes:
        result["sorted_batches"] = profile(translate, batches, len(chosen))
    if "one_sentence" in args.passes:
        result["one_sentence"] = profile(translate, singles, len(singles))
    result["machine"]["load_average_after"] = load_average()
    for name in args.passes:
        figures = result[name]
        top = ", ".join(f"{k} {v['ms']:.0f} ({v['us_per_run']:.0f} us a run)"
                        for k, v in list(figures["by_type"].items())[:8])
        print(f"{name}: {figures['wall_s']:.2f} s, {figures['steps']} steps ({figures['steps_per_sentence']} a "
              f"sentence), {figures['ops_per_step']} ops/step; ms a step: {figures['ms_per_step']}; ms by type: {top}")
        print("  by part: " + ", ".join(f"{k} {v['ms']:.0f}" for k, v in figures["by_part"].items()))
    print("loop bodies:", graph["loop_bodies"])
    if args.output:
        write_json(args.output, result)
    return result


if __name__ == "__main__":
    main()
