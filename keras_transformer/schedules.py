"""The paper's learning-rate schedule (section 5.3)."""

import keras
from keras import ops

from keras_transformer.validation import check_positive, check_positive_number


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    Rises linearly for `warmup_steps` steps, then decays with the inverse
    square root of the step. Keras calls a schedule with
    `optimizer.iterations`, the number of updates already applied (0 for
    the first), while the paper's `step_num` counts from 1: the schedule is
    called with `iterations` and evaluates the formula at `iterations + 1`,
    so update n gets the paper's rate for step n and update `warmup_steps`
    gets the peak.

    Args:
        d_model: int. Model width.
        warmup_steps: int. Defaults to `4000`.
        scale: float. Multiplies the rate (1 in the paper). Defaults to `1.0`.

    Example:

    >>> schedule = TransformerSchedule(d_model=512)
    >>> optimizer = keras.optimizers.Adam(schedule, 0.9, 0.98, 1e-9)
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        check_positive("d_model", d_model)
        check_positive("warmup_steps", warmup_steps)
        check_positive_number("scale", scale)
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        # step: optimizer.iterations (0-based); the paper's step_num is 1-based.
        step = ops.maximum(ops.cast(step, "float32") + 1.0, 1.0)
        warmup = float(self.warmup_steps)
        rate = ops.minimum(ops.rsqrt(step), step * warmup**-1.5)
        return self.scale * self.d_model**-0.5 * rate

    def get_config(self):
        return {
            "d_model": self.d_model,
            "warmup_steps": self.warmup_steps,
            "scale": self.scale,
        }


def paper_optimizer(d_model, warmup_steps=4000, scale=1.0, **kwargs):
    """Adam(beta_1=0.9, beta_2=0.98, epsilon=1e-9) on `TransformerSchedule`.

    `d_model`, `warmup_steps` and `scale` are the schedule's (fine-tuning
    wants a smaller scale, such as 0.1); other keyword arguments go to
    `keras.optimizers.Adam`.

    Example:

    >>> model.compile(optimizer=paper_optimizer(d_model=512), ...)
    >>> fine_tuning = paper_optimizer(d_model=512, warmup_steps=100, scale=0.1)
    """
    return keras.optimizers.Adam(
        TransformerSchedule(d_model, warmup_steps, scale),
        beta_1=0.9,
        beta_2=0.98,
        epsilon=1e-9,
        **kwargs,
    )
