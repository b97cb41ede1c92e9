"""The paper's optimizer with gradient accumulation and token budgets.

Section 5.1 trains on batches of about 25,000 source and 25,000 target
tokens. With fewer devices, `accumulation_steps()` says how many
micro-batches of `tokens_per_batch` (global, all replicas together) make one
optimizer step, and `paper_training_optimizer()` builds Adam(0.9, 0.98,
1e-9) with `gradient_accumulation_steps` so that those micro-batches give
one update with their averaged gradients.

Keras' schedules see the optimizer's micro-step counter; `GlobalStepSchedule`
divides it by the accumulation steps so the paper's warm-up and decay run in
real (global) optimizer steps.

Example:

>>> steps = accumulation_steps(tokens_per_step=25000, tokens_per_batch=6250)
>>> steps
4
>>> optimizer = paper_training_optimizer(d_model=512, warmup_steps=4000,
...                                      accumulation=steps)
"""

import math

import keras
from keras import ops

from keras_transformer.schedules import TransformerSchedule

PAPER_TOKENS_PER_STEP = 25000


def accumulation_steps(tokens_per_step=PAPER_TOKENS_PER_STEP, tokens_per_batch=None):
    """Micro-batches per optimizer step: `round(tokens_per_step / tokens_per_batch)`, at least 1.

    `tokens_per_batch` is the global budget of one `model.fit` batch (the
    data pipeline's `tokens_per_batch`, split across replicas). Without it
    there is no accumulation.
    """
    if not tokens_per_batch:
        return 1
    if tokens_per_batch <= 0 or tokens_per_step <= 0:
        raise ValueError(
            "Token budgets must be > 0. Received: "
            f"tokens_per_step={tokens_per_step}, tokens_per_batch={tokens_per_batch}"
        )
    return max(1, int(math.floor(tokens_per_step / tokens_per_batch + 0.5)))


@keras.saving.register_keras_serializable(package="keras_transformer")
class GlobalStepSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(micro_step // accumulation)`: a schedule in optimizer steps.

    The update of global step k (0-based) happens at micro-step
    `(k + 1) * accumulation - 1`, which this maps to `k`.
    """

    def __init__(self, schedule, accumulation=1):
        if isinstance(schedule, dict):
            schedule = keras.saving.deserialize_keras_object(schedule)
        self.schedule = schedule
        self.accumulation = int(accumulation)

    def __call__(self, step):
        return self.schedule(ops.floor_divide(ops.cast(step, "int32"), self.accumulation))

    def get_config(self):
        return {
            "schedule": keras.saving.serialize_keras_object(self.schedule),
            "accumulation": self.accumulation,
        }


def paper_training_optimizer(d_model, warmup_steps=4000, accumulation=1, scale=1.0, **kwargs):
    """Adam(0.9, 0.98, 1e-9) on the paper's schedule, in global steps."""
    schedule = TransformerSchedule(d_model, warmup_steps, scale)
    if accumulation > 1:
        schedule = GlobalStepSchedule(schedule, accumulation)
        kwargs["gradient_accumulation_steps"] = accumulation
    return keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9, **kwargs)
