"""Argument checks shared by the layers, the model, the schedule, decoding and serving.

Every error names the argument and the value received, as Keras does.
"""

import math
import numbers


def _check(name, value, kind, in_range, description):
    """Raises `ValueError` unless `value` is a `kind` (not a bool) and `in_range(value)`."""
    if isinstance(value, bool) or not isinstance(value, kind) or not in_range(value):
        raise ValueError(f"Argument `{name}` must be {description}. Received: {name}={value!r}")


def check_positive(name, value):
    """Raises `ValueError` unless `value` is an integer > 0."""
    _check(name, value, numbers.Integral, lambda v: v > 0, "a positive integer")


def check_non_negative_int(name, value):
    """Raises `ValueError` unless `value` is an integer >= 0 (e.g. a token id)."""
    _check(name, value, numbers.Integral, lambda v: v >= 0, "a non-negative integer")


def check_positive_number(name, value):
    """Raises `ValueError` unless `value` is a finite number > 0."""
    _check(name, value, numbers.Real, lambda v: 0 < v < math.inf, "a finite number > 0")


def check_non_negative_number(name, value):
    """Raises `ValueError` unless `value` is a finite number >= 0."""
    _check(name, value, numbers.Real, lambda v: 0 <= v < math.inf, "a finite number >= 0")


def check_rate(name, value):
    """Raises `ValueError` unless `value` is a number in [0, 1)."""
    _check(name, value, numbers.Real, lambda v: 0 <= v < 1, "a number in [0, 1)")


def check_bool(name, value):
    """Raises `ValueError` unless `value` is a bool (a string such as `"no"`
    would silently count as `True`)."""
    if not isinstance(value, bool):
        raise ValueError(
            f"Argument `{name}` must be True or False. Received: {name}={value!r}"
        )


def check_phrases(name, phrases):
    """Raises `ValueError` unless `phrases` is a list (or tuple) of strings,
    none of them blank: one sentence's terminology constraints."""
    if isinstance(phrases, str) or not isinstance(phrases, (list, tuple)) or not all(
            isinstance(p, str) and p.strip() for p in phrases):
        raise ValueError(f"Argument `{name}` must be a list of phrases, none of them blank. "
                         f"Received: {name}={phrases!r}")
