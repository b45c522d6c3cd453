"""A wall-clock budget for a compiled training loop (ours; `cj.refine`).

A time limit cannot be a traced number of iterations: the cost of an iteration is only known once it runs.
So a loop built with `timed=True` asks the host every `EVERY` iterations whether the deadline set by
`deadline(seconds)` around the call has passed (`expired`, one `io_callback`). The deadline lives on the
host, not in the program, so a new budget reuses the compiled loop; outside a `deadline` block it is
infinite and the loop runs as if untimed. Loops built without `timed` contain no callback at all: the
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

__all__ = ["EVERY", "deadline", "expired"]

EVERY = 64        # iterations between two looks at the clock (a look costs ~10-50 us on CPU)
_DEADLINE = [math.inf]


@contextlib.contextmanager
def deadline(seconds: float):
    """Loops built with `timed=True` and run inside this block stop once `seconds` have passed from entry."""
    previous = _DEADLINE[0]
    _DEADLINE[0] = time.perf_counter() + float(seconds)
    try:
        yield
    finally:
        _DEADLINE[0] = previous


def _past_deadline() -> np.ndarray:
    return np.asarray(time.perf_counter() > _DEADLINE[0])


def expired(step: jax.Array, every: int = EVERY) -> jax.Array:
    """Traced: whether the host's deadline has passed, looked up every `every` steps (False between)."""
    return jax.lax.cond(step % every == 0,
                        lambda: io_callback(_past_deadline, jax.ShapeDtypeStruct((), jnp.bool_), ordered=False),
                        lambda: jnp.asarray(False))
