"""`keras-transformer average-checkpoints`: average the weights of the last N checkpoints.

    keras-transformer average-checkpoints runs/base/checkpoints --last 5 \
        --output runs/base/average.weights.h5
    keras-transformer average-checkpoints a.weights.h5 b.weights.h5 --output ab.weights.h5
"""

import os

NAME = "average-checkpoints"
HELP = "Average the weights of the last N checkpoints into one file."


def add_arguments(p):
    p.add_argument("checkpoints", nargs="+",
                   help="a checkpoint directory, or .weights.h5 files to average")
    p.add_argument("--last", type=int, default=5,
                   help="with a directory: average its newest N intact checkpoints (paper: 5 base, 20 big)")
    p.add_argument("--output", required=True, help="the averaged .weights.h5 file")


def run(args):
    from keras_transformer.training.averaging import average_checkpoints

    one_folder = len(args.checkpoints) == 1 and os.path.isdir(args.checkpoints[0])
    paths = average_checkpoints(args.checkpoints[0] if one_folder else args.checkpoints, args.output, last=args.last)
    print(f"Averaged {len(paths)} checkpoint(s) into {args.output}:")
    for path in paths:
        print(f"  {path}")
    return 0
