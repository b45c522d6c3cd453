"""Checks of scalar options at the public boundary: each raises `error` (ValueError, or a subclass such as the
CLI's ConfigError) naming the argument and what was given, and returns the value as a plain Python int, float
or bool (a NumPy scalar would make a different jit cache key from the int it equals). `core.validate`
re-exports them: the package's one set of option checks."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_bool", "check_float", "check_fraction", "check_int", "check_nonneg_float", "check_nonneg_int",
           "check_positive_float", "check_positive_int"]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check_int(value: Any, name: str, low: Any = None, high: Any = None, *, error: type = ValueError) -> int:
    """An integer (Python or NumPy, not a bool) in [low, high] (None: unbounded)."""
    if not _is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        if low == 1 and high is None:
            what = "a positive integer"
        elif high is None:
            what = "an integer" if low is None else f"an integer >= {low}"
        else:
            what = f"an integer <= {high}" if low is None else f"an integer in [{low}, {high}]"
        raise error(f"{name}: expected {what}, got {value!r}")
    return int(value)


def check_positive_int(value: Any, name: str, *, error: type = ValueError) -> int:
    """An integer >= 1; rejects True, 1.5, 0 and -1."""
    return check_int(value, name, 1, error=error)


def check_nonneg_int(value: Any, name: str, *, error: type = ValueError) -> int:
    """An integer >= 0."""
    return check_int(value, name, 0, error=error)


def check_bool(value: Any, name: str, *, error: type = ValueError) -> bool:
    """True or False (a NumPy bool too); not 1, 0 or None."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(f"{name}: expected True or False, got {value!r}")
    return bool(value)


def check_float(value: Any, name: str, low: Any = None, high: Any = None, *, open_low: bool = False,
                open_high: bool = False, finite: bool = True, what: str = "", error: type = ValueError) -> float:
    """A real number (an int too, not a bool) in the interval from low to high, each end closed unless
    `open_low`/`open_high`; NaN never passes, inf only with finite=False. `what` names the set in the
    message (default: the interval)."""
    ok = _is_real(value) and not np.isnan(value) and (not finite or np.isfinite(value))
    if ok and low is not None:
        ok = value > low if open_low else value >= low
    if ok and high is not None:
        ok = value < high if open_high else value <= high
    if not ok:
        if not what:
            left = "(" if open_low or low is None else "["
            right = ")" if open_high or high is None else "]"
            lo = "-inf" if low is None else f"{low}"
            hi = "inf" if high is None else f"{high}"
            bounded = low is not None and high is not None
            what = f"a {'finite ' if finite and not bounded else ''}number in {left}{lo}, {hi}{right}"
        raise error(f"{name}: expected {what}, got {value!r}")
    return float(value)


def check_positive_float(value: Any, name: str, *, finite: bool = True, error: type = ValueError) -> float:
    """A number > 0 (finite unless finite=False)."""
    return check_float(value, name, 0, open_low=True, finite=finite, what="a positive number", error=error)


def check_nonneg_float(value: Any, name: str, *, error: type = ValueError) -> float:
    """A finite number >= 0."""
    return check_float(value, name, 0, what="a non-negative number", error=error)


def check_fraction(value: Any, name: str, *, error: type = ValueError) -> float:
    """A number in (0, 1]."""
    return check_float(value, name, 0, 1, open_low=True, error=error)
