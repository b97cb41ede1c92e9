"""Beam search's stop rules side by side: BLEU, decoding steps and one sentence's time.

    python benchmarks/stop_rules.py --output benchmarks/results/stop_rules_cpu.json

For each shipped preset's test split (`--presets`), the `Translator` on
TensorFlow (its default graph, beam 4, alpha 0.6) with `stop="exact"` and
with `stop="early"` (`keras_transformer.decoding.beam_search`):
- BLEU and chrF of the translations of the whole split (batches of 64),
  and the sentences whose translations differ between the rules;
- the decoding steps of each piece until its sentence is done, by the same
  search with a step counter (`CountingBeamSampler`), in the same batches:
  their mean and median, and the steps of a batch (its longest piece's);
- one sentence at a time over the first `--latency-sentences` sources, the
  rules taking turns sentence by sentence in one process (a change in the
  machine's load falls on both alike): p50 and p90 ms, and their ratio.

The load average before and after each preset is recorded; compare the
rules within one run.
"""

import argparse
import collections
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from benchmarks.report import cpu_flags, cpu_name, load_average, write_json  # noqa: E402

PRESETS = ("tatoeba_en_fr", "tatoeba_fr_en", "libreoffice_en_de")
RULES = ("exact", "early")


def counting_sampler(sampler):
    """`sampler`'s beam search with each sentence's decoding steps counted:
    its result is `(tokens, scores, steps)`, `steps` `(batch,)` int32, the
    steps taken while the sentence was not done."""
    from keras import ops

    from keras_transformer.decoding import BeamSampler

    class CountingBeamSampler(BeamSampler):
        result_fields = BeamSampler.result_fields + ("steps",)

        def start(self, source_ids, length, bos_id, limits):
            state = super().start(source_ids, length, bos_id, limits)
            counted = collections.namedtuple("CountedBeamState", state._fields + ("steps",))
            return counted(*state, ops.zeros((ops.shape(source_ids)[0],), dtype="int32"))

        def extend(self, state, log_probs, step, limits, eos_id):
            going_on = ops.cast(ops.logical_not(self.done(state, step, limits)), "int32")
            new, parents = super().extend(state, log_probs, step, limits, eos_id)
            return type(state)(*new, state.steps + going_on), parents

        def result(self, state):
            return (*super().result(state), state.steps)

    return CountingBeamSampler(sampler.beam_size, sampler.alpha, sampler.num_return, stop=sampler.stop)


def steps_per_piece(translator, sources, batch_size):
    """Each piece's decoding steps, in the `Translator`'s batches."""
    import tensorflow as tf

    from keras_transformer.decoding import decode

    sampler = counting_sampler(translator.sampler)
    search = tf.function(
        lambda source: decode(translator.model, source, sampler, max_extra_length=translator.max_extra_length,
                              narrow_batches=True)[2],
        input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    pieces, _ = translator.preprocessor.pieces(sources)
    steps, batch_steps = [None] * len(pieces), []
    for chunk, width in translator.preprocessor.batches([len(p) for p in pieces], batch_size, False):
        batch = np.zeros((len(chunk), width), dtype="int32")
        for row, i in enumerate(chunk):
            batch[row, : len(pieces[i])] = pieces[i]
        counted = search(batch).numpy()
        batch_steps.append(int(counted.max()))
        for row, i in enumerate(chunk):
            steps[i] = int(counted[row])
    return steps, batch_steps


def one_sentence_ms(translators, sources):
    """`{rule: [ms]}`: each source translated alone by each translator in turn."""
    for translator in translators.values():  # the graph traced, outside the timing
        translator.translate(sources[:1])
    times = {rule: [] for rule in translators}
    for source in sources:
        for rule, translator in translators.items():
            start = time.perf_counter()
            translator.translate([source])
            times[rule].append(1000 * (time.perf_counter() - start))
    return times


def measure(preset, args):
    from keras_transformer import Translator, datasets
    from keras_transformer.models import presets
    from keras_transformer.translation.tokenizer import SubwordTokenizer
    from keras_transformer.evaluation import corpus_bleu

    sources, references = datasets.load_references(preset, "test")
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    model, tokenizer = presets.load_model(preset), SubwordTokenizer.from_preset(preset)
    translators = {rule: Translator(model, tokenizer, stop=rule, batch_size=args.batch_size, eager_steps=0)
                   for rule in RULES}
    result = {"sentences": len(sources), "load_average_before": load_average(), "rules": {}}
    outputs = {}
    for rule, translator in translators.items():
        start = time.perf_counter()
        outputs[rule] = translator.translate(sources)
        seconds = time.perf_counter() - start
        bleu, _, chrf, _ = corpus_bleu(outputs[rule], references)
        steps, batch_steps = steps_per_piece(translator, sources, args.batch_size)
        result["rules"][rule] = {
            "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2), "batches_s": round(seconds, 2),
            "steps_per_piece_mean": round(float(np.mean(steps)), 2), "steps_per_piece_median": float(np.median(steps)),
            "steps_per_batch_mean": round(float(np.mean(batch_steps)), 2), "steps_per_batch": batch_steps,
        }
    latency = one_sentence_ms(translators, sources[: args.latency_sentences])
    for rule, times in latency.items():
        result["rules"][rule].update(one_sentence_p50_ms=round(float(np.percentile(times, 50)), 2),
                                     one_sentence_p90_ms=round(float(np.percentile(times, 90)), 2))
    differ = [i for i, (a, b) in enumerate(zip(outputs["exact"], outputs["early"])) if a != b]
    exact, early = result["rules"]["exact"], result["rules"]["early"]
    result.update(
        differ=len(differ), differences=[{"index": i, "source": sources[i], "exact": outputs["exact"][i],
                                          "early": outputs["early"][i]} for i in differ[: args.show]],
        bleu_early_minus_exact=round(early["bleu"] - exact["bleu"], 2),
        steps_early_over_exact=round(early["steps_per_piece_mean"] / exact["steps_per_piece_mean"], 3),
        one_sentence_p50_early_over_exact=round(early["one_sentence_p50_ms"] / exact["one_sentence_p50_ms"], 3),
        latency_sentences=len(latency["exact"]), load_average_after=load_average(),
    )
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", choices=PRESETS, default=list(PRESETS))
    parser.add_argument("--limit", type=int, default=None, help="the first N test sources of each (default: all)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency-sentences", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show", type=int, default=20, help="differing translations kept in the JSON")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    report = {
        "benchmark": "stop_rules",
        "command": " ".join(["python", "benchmarks/stop_rules.py"] + list(sys.argv[1:] if argv is None else argv)),
        "machine": {"cpu": cpu_name(), "cpu_flags": cpu_flags(), "cpu_count": os.cpu_count(), "threads": args.threads,
                    "python": platform.python_version(), "tensorflow": tf.__version__},
        "beam_size": 4, "alpha": 0.6, "batch_size": args.batch_size, "presets": {},
    }
    for preset in args.presets:
        result = report["presets"][preset] = measure(preset, args)
        exact, early = result["rules"]["exact"], result["rules"]["early"]
        print(f"{preset}: BLEU exact {exact['bleu']:.2f}, early {early['bleu']:.2f} ({result['differ']} of "
              f"{result['sentences']} differ); steps per piece {exact['steps_per_piece_mean']:.1f} / "
              f"{early['steps_per_piece_mean']:.1f}; one sentence p50 {exact['one_sentence_p50_ms']:.1f} / "
              f"{early['one_sentence_p50_ms']:.1f} ms; load {result['load_average_before']} -> "
              f"{result['load_average_after']}", flush=True)
    if args.output:
        write_json(args.output, report)
    return report


if __name__ == "__main__":
    main()
