"""Input pipeline throughput on CPU: sentence pairs/s and tokens/s.

    python benchmarks/pipeline_throughput.py --tokens-per-batch 4096 --output benchmarks/results/pipeline.json

Reads the shipped Tatoeba training split, learns (or loads) the tokenizer,
then times `make_dataset` twice: building it (the tokenization pass) and one
full epoch of batches. Compare tokens/s with the training rate of
`train_throughput.py` on the same machine: the pipeline must feed at least
10x what training consumes.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens-per-batch", type=int, default=4096)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--output")
    args = parser.parse_args(argv)

    from keras_transformer import datasets
    from keras_transformer.data import SubwordTokenizer, make_dataset

    pairs = datasets.load("tatoeba_en_fr", "train")
    start = time.perf_counter()
    tokenizer = SubwordTokenizer.train([s for p in pairs for s in p], args.vocab_size)
    vocabulary_s = time.perf_counter() - start
    start = time.perf_counter()
    dataset, report = make_dataset(pairs, tokenizer, args.tokens_per_batch, args.max_length, log=None)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    batches = sentences = tokens = padded = 0
    for (source, _), labels in dataset:
        batches += 1
        sentences += int(source.shape[0])
        tokens += int((source.numpy() != 0).sum() + (labels.numpy() != 0).sum())
        padded += int(source.shape[0] * source.shape[1] * 2)
    epoch_s = time.perf_counter() - start
    result = dict(
        pairs=len(pairs), kept=report.kept, vocabulary_s=vocabulary_s, build_s=build_s, epoch_s=epoch_s,
        batches=batches, pairs_per_s=sentences / epoch_s, tokens_per_s=tokens / epoch_s,
        pairs_per_s_with_build=sentences / (epoch_s + build_s), padding_share=1 - tokens / padded,
        tokens_per_batch=args.tokens_per_batch, cpu_count=os.cpu_count(),
    )
    print(f"{len(pairs)} pairs; vocabulary {vocabulary_s:.1f} s; tokenize + build {build_s:.1f} s; one epoch {epoch_s:.1f} s")
    print(f"{'batches':>8s} {'pairs/s':>10s} {'tokens/s':>10s} {'pairs/s incl. build':>20s} {'padding':>8s}")
    print(f"{batches:8d} {result['pairs_per_s']:10.0f} {result['tokens_per_s']:10.0f} "
          f"{result['pairs_per_s_with_build']:20.0f} {100 * result['padding_share']:7.1f}%")
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
