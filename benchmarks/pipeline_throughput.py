"""Input pipeline throughput on CPU: sentence pairs/s and tokens/s.

    python benchmarks/pipeline_throughput.py --output benchmarks/results/pipeline.json

Reads the shipped Tatoeba training split, learns a tokenizer, then times
`make_dataset` over one full epoch, for both inputs it takes:

- `list`: a Python list of pairs, tokenized once up front (in the graph),
  then shuffled, bucketed, padded and prefetched by tf.data;
- `stream`: a `tf.data.Dataset` of string pairs, tokenized inside the
  pipeline (how WMT-sized TFDS data is fed).

"build" is the time `make_dataset` takes before the first batch can be
asked for; pairs/s and tokens/s are over the epoch, build excluded and
included. Tokens are the real (non-padding) source + target-label tokens.
Compare with the training rate of `train_throughput.py` on the same machine:
the pipeline must feed at least ten times what training consumes.
"""

import argparse
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.report import write_json  # noqa: E402


def measure(mode, pairs, tokenizer, args):
    import tensorflow as tf

    from keras_transformer.data import make_dataset

    start = time.perf_counter()
    if mode == "stream":
        data = tf.data.Dataset.from_tensor_slices(([s for s, _ in pairs], [t for _, t in pairs]))
    else:
        data = pairs
    dataset, report = make_dataset(data, tokenizer, args.tokens_per_batch, args.max_length, seed=0, log=None)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    batches = sentences = tokens = padded = 0
    for (source, _), labels in dataset:
        source, labels = source.numpy(), labels.numpy()
        batches += 1
        sentences += source.shape[0]
        tokens += int((source != 0).sum() + (labels != 0).sum())
        padded += source.size + labels.size
    epoch_s = time.perf_counter() - start
    return dict(
        mode=mode, build_s=round(build_s, 3), epoch_s=round(epoch_s, 3), batches=batches, pairs=sentences,
        dropped=report.dropped, pairs_per_s=round(sentences / epoch_s, 1), tokens_per_s=round(tokens / epoch_s, 1),
        pairs_per_s_with_build=round(sentences / (epoch_s + build_s), 1),
        tokens_per_s_with_build=round(tokens / (epoch_s + build_s), 1), padding_share=round(1 - tokens / padded, 4),
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--modes", default="list,stream", help="comma-separated: list, stream")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args(argv)

    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer

    pairs = datasets.load("tatoeba_en_fr", "train")
    start = time.perf_counter()
    tokenizer = SubwordTokenizer.train([s for p in pairs for s in p], args.vocab_size)
    vocabulary_s = time.perf_counter() - start
    rows = [measure(mode, pairs, tokenizer, args) for mode in args.modes.split(",")]

    print(f"{len(pairs)} Tatoeba pairs, {tokenizer.vocab_size} pieces (learned in {vocabulary_s:.1f} s), "
          f"{args.tokens_per_batch} tokens per batch, max_length {args.max_length}, {os.cpu_count()} CPUs")
    header = f"{'input':>6} {'build s':>8} {'epoch s':>8} {'batches':>8} {'pairs/s':>9} {'tokens/s':>10} " \
             f"{'pairs/s+build':>14} {'tokens/s+build':>15} {'padding':>8}"
    print(header)
    for r in rows:
        print(f"{r['mode']:>6} {r['build_s']:8.2f} {r['epoch_s']:8.2f} {r['batches']:8d} {r['pairs_per_s']:9.0f} "
              f"{r['tokens_per_s']:10.0f} {r['pairs_per_s_with_build']:14.0f} {r['tokens_per_s_with_build']:15.0f} "
              f"{100 * r['padding_share']:7.1f}%")
    if args.output:
        result = dict(
            corpus="tatoeba_en_fr/train", corpus_pairs=len(pairs), vocab_size=tokenizer.vocab_size,
            vocabulary_s=round(vocabulary_s, 3), tokens_per_batch=args.tokens_per_batch, max_length=args.max_length,
            cpu_count=os.cpu_count(), machine=platform.processor() or platform.machine(), results=rows,
        )
        write_json(args.output, result)


if __name__ == "__main__":
    main()
