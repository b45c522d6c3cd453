"""Will a solver's state fit? Checked before anything is allocated (ours).

A greedy solver's state grows with its capacity M, not only with V: OMP keeps a QR factor of its support
rows (an M x M triangle R for the iterate and one for the best iterate), so `cj.coreset(..., size=50_000,
method="omp")` at N = 10^5 asked XLA for 70 GB and died with RESOURCE_EXHAUSTED after the projection had
run. `check_fits` reads the state's shapes with `jax.eval_shape` of the solver's `init` on the problem's
shapes (`solvers.base.problem_spec`: no allocation, no compilation), counts the loop's carry twice (XLA
double-buffers a while loop's state) plus one more state's worth of temporaries, adds V, and compares that
with the memory available on V's device: `MemAvailable` of /proc/meminfo for a CPU, the allocator's limit
minus what is in use for an accelerator. A size that cannot fit is a ValueError naming
the size, the estimate and the memory available, before any solver work.
"""

from __future__ import annotations

import math
from typing import Optional

import jax
import numpy as np

from ..registry import Construction
from ..solvers.base import problem_spec

__all__ = ["available_bytes", "check_fits", "state_bytes"]

COPIES = 3   # the loop carry, its double buffer, and temporaries of the same order


def state_bytes(construction: Construction, size: int, shape: tuple, dtype, options: tuple = ()) -> int:
    """Bytes of the solver's loop state for V of `shape` and `dtype`, from its shapes alone."""
    solver = construction.make(size, **dict(options))
    key = jax.eval_shape(jax.random.key, 0)  # abstract: no eager seeding program
    state = jax.eval_shape(solver.init, problem_spec(tuple(shape), dtype), key)
    return int(sum(np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(state)
                   if hasattr(x, "shape")))


def available_bytes(device: Optional[jax.Device] = None) -> float:
    """Memory available for new buffers on `device` (default: the first device); inf when unknown."""
    device = device or jax.devices()[0]
    if device.platform != "cpu":
        stats = device.memory_stats() or {}
        if "bytes_limit" in stats:
            return float(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
        return math.inf
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return math.inf


def check_fits(construction: Construction, size: int, shape: tuple, dtype, device: Optional[jax.Device] = None,
               options: tuple = ()) -> int:
    """ValueError if `construction`'s state at capacity `size` for V of `shape` and `dtype` cannot fit on
    `device` (default: the first device), V included; else the estimate (bytes)."""
    if construction.needs != "vectors":
        return 0
    per_state = state_bytes(construction, size, tuple(shape), dtype, options)
    v_bytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    need = COPIES * per_state + v_bytes
    free = available_bytes(device)
    if need > free:
        raise ValueError(f"size: {construction.name} at size {size} needs about {need / 2**30:.1f} GiB (its state "
                         f"{per_state / 2**30:.2f} GiB, held about {COPIES}x by the loop, plus V "
                         f"{v_bytes / 2**30:.2f} GiB), but only {free / 2**30:.1f} GiB is available on "
                         f"{device or jax.devices()[0]}; use a smaller size (or tol= to choose one)")
    return need
