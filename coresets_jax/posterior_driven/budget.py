"""A wall-clock budget for a compiled training loop (ours; `cj.refine`).

A time limit cannot be a traced number of iterations: the cost of an iteration is only known once it runs.
So a program built with `timed=True` starts the clock when it starts running (`start_clock`, so that
compilation is not counted), and its loop asks the host every `EVERY` iterations whether the budget set by
`deadline(seconds)` around the call has passed since then (`expired`; each one `io_callback`). The budget
lives on the host, not in the program, so a new budget reuses the compiled loop; outside a `deadline`
block it is infinite and the loop runs as if untimed. Loops built without `timed` contain no callback at all: the
published methods stay pure, vmappable and shardable.
"""

from __future__ import annotations

import contextlib
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

__all__ = ["EVERY", "deadline", "expired", "start_clock"]

EVERY = 64        # iterations between two looks at the clock (a look costs ~10-50 us on CPU)
_BUDGET = [math.inf]
_DEADLINE = [math.inf]


@contextlib.contextmanager
def deadline(seconds: float):
    """Programs built with `timed=True` and run inside this block stop their loops once `seconds` have
    passed since they started running (`start_clock`; from entry into the block for one that does not
    call it)."""
    previous = _BUDGET[0], _DEADLINE[0]
    _BUDGET[0] = float(seconds)
    _DEADLINE[0] = time.perf_counter() + float(seconds)
    try:
        yield
    finally:
        _BUDGET[0], _DEADLINE[0] = previous


def _start() -> np.ndarray:
    _DEADLINE[0] = time.perf_counter() + _BUDGET[0]
    return np.zeros((), np.float32)


def start_clock() -> jax.Array:
    """Traced: start the budget's clock now; returns 0.0 (float32), which the caller adds to an input of
    the work to be timed so that the clock starts before that work."""
    return io_callback(_start, jax.ShapeDtypeStruct((), jnp.float32), ordered=False)


def _past_deadline() -> np.ndarray:
    return np.asarray(time.perf_counter() > _DEADLINE[0])


def expired(step: jax.Array, every: int = EVERY) -> jax.Array:
    """Traced: whether the host's deadline has passed, looked up every `every` steps (False between)."""
    return jax.lax.cond(step % every == 0,
                        lambda: io_callback(_past_deadline, jax.ShapeDtypeStruct((), jnp.bool_), ordered=False),
                        lambda: jnp.asarray(False))
