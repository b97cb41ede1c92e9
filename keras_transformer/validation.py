"""Argument checks shared by the layers, the model, the schedule, decoding and serving.

Every error names the argument and the value received, as Keras does.
"""

import numbers


def check_positive(name, value):
    """Raises `ValueError` unless `value` is an integer > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value <= 0
    ):
        raise ValueError(
            f"Argument `{name}` must be a positive integer. "
            f"Received: {name}={value!r}"
        )


def check_bool(name, value):
    """Raises `ValueError` unless `value` is a bool (a string such as `"no"`
    would silently count as `True`)."""
    if not isinstance(value, bool):
        raise ValueError(
            f"Argument `{name}` must be True or False. Received: {name}={value!r}"
        )


def check_positive_number(name, value):
    """Raises `ValueError` unless `value` is a finite number > 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 < value < float("inf")
    ):
        raise ValueError(
            f"Argument `{name}` must be a finite number > 0. "
            f"Received: {name}={value!r}"
        )


def check_non_negative_number(name, value):
    """Raises `ValueError` unless `value` is a finite number >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 <= value < float("inf")
    ):
        raise ValueError(
            f"Argument `{name}` must be a finite number >= 0. "
            f"Received: {name}={value!r}"
        )


def check_non_negative_int(name, value):
    """Raises `ValueError` unless `value` is an integer >= 0 (e.g. a token id)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(
            f"Argument `{name}` must be a non-negative integer. "
            f"Received: {name}={value!r}"
        )


def check_rate(name, value):
    """Raises `ValueError` unless `value` is a number in [0, 1)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not 0 <= value < 1
    ):
        raise ValueError(
            f"Argument `{name}` must be a number in [0, 1). "
            f"Received: {name}={value!r}"
        )
