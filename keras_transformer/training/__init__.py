"""Training at scale with `model.fit`: strategies, mixed precision,
gradient accumulation, atomic checkpoints with resume, averaging.

Example:

>>> from keras_transformer.training import train, average_checkpoints
>>> model = train("base", train_ds, "runs/base", validation_data=valid_ds,
...               vocab_size=37000, tokens_per_batch=6250)
>>> average_checkpoints("runs/base/checkpoints", "runs/base/average.weights.h5", last=5)
"""

from keras_transformer.training.averaging import average_checkpoints
from keras_transformer.training.callbacks import BleuCallback, CheckpointAndRestore, NonFiniteLossGuard, TimeLimit
from keras_transformer.training.checkpoints import (
    latest_checkpoint,
    list_checkpoints,
    restore_checkpoint,
    save_checkpoint,
)
from keras_transformer.training.manifest import RunMismatchError, claim_output_dir
from keras_transformer.training.optimizer import GlobalStepSchedule, accumulation_steps, paper_training_optimizer
from keras_transformer.training.plateau import StalledTrainingWarning, frequency_loss
from keras_transformer.training.precision import resolve_jit_compile, resolve_precision
from keras_transformer.training.strategy import Distributed, parse_tf_config, select_strategy
from keras_transformer.training.train import TrainingOptions, build_model, model_config, train
