"""Progress bars (tqdm) for long work, also from inside jitted `lax` loops.

Inside `jit`, a loop reports through `jax.debug.callback`: `tick(count, total, desc, every)` calls the host
every `every` iterations (a `lax.cond` on the counter; the other iterations pay one integer compare). The
tick is `vmap`-safe: under `vmap` (batched trials, chains) a custom batching rule reduces the batched counter
to its maximum, so the host gets ONE call per reporting step, not one per batch element, and the predicate of
the `lax.cond` stays unbatched (a batched predicate would turn it into a `select` that runs the callback on
every iteration).

Progress is on when stderr is a terminal, unless switched off globally by `enabled(False)` (the CLI's
`--quiet`) or the environment variable CORESETS_JAX_PROGRESS=0 (=1 forces it on). The switch is read when a
loop is traced: with progress off, no tick is traced into the loop at all, so it costs nothing; a loop
compiled while progress was on still checks the switch on the host and stays silent once it is off.

Helpers:
- `tick(count, total, desc, every)` and `finish(count, desc)`: building blocks for any traced loop;
- `while_loop(cond, body, init, desc, every)`: `lax.while_loop` with a tick per iteration (solver drivers);
- `scan(body, init, xs, length, desc, every)`: `lax.scan` with a tick per step, a drop-in replacement for
  warm-up and sampling scans;
- `bar(iterable, desc, total)`: tqdm over a Python iterable (the CLI's stages), respecting the switch.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any, Callable, Iterable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["ENV", "bar", "enabled", "every_for", "finish", "is_enabled", "scan", "tick", "while_loop"]

ENV = "CORESETS_JAX_PROGRESS"
_forced: Optional[bool] = None


def enabled(flag: Optional[bool]) -> bool:
    """Switch progress on (True), off (False), or back to automatic (None: CORESETS_JAX_PROGRESS, else on
    iff stderr is a terminal). Returns whether progress is now on; `is_enabled()` reads without changing."""
    global _forced
    _forced = None if flag is None else bool(flag)
    return is_enabled()


def is_enabled() -> bool:
    """Whether progress is on: `enabled(...)` if set, else CORESETS_JAX_PROGRESS, else stderr.isatty()."""
    if _forced is not None:
        return _forced
    env = os.environ.get(ENV)
    if env is not None:
        return env.strip().lower() not in ("0", "false", "off", "no", "")
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# ------------------------------------------------------------------------------------------------------
# Host side: one tqdm bar per description, restarted when its count goes back (a new run of the loop).

_bars: dict = {}
_lock = threading.Lock()


def _new_bar(desc: str, total: Optional[int]):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, leave=False, dynamic_ncols=True, file=sys.stderr, mininterval=0.2)


def _host_update(desc: str, count, total) -> None:
    if not is_enabled():
        return
    count, total = int(count), int(total)
    total = total if total > 0 else None
    with _lock:
        entry = _bars.get(desc)
        if entry is None or count < entry.n:
            if entry is not None:
                entry.close()
            entry = _bars[desc] = _new_bar(desc, total)
        entry.update(count - entry.n)
        if total is not None and count >= total:
            entry.close()
            del _bars[desc]


def _host_finish(desc: str, count) -> None:
    with _lock:
        entry = _bars.pop(desc, None)
        if entry is not None:
            entry.update(max(0, int(count) - entry.n))
            entry.close()


# ------------------------------------------------------------------------------------------------------
# Traced side.


@functools.lru_cache(maxsize=None)
def _ticker(desc: str, every: int, ordered: bool):
    """A custom-vmap tick for one (desc, every): identity on `count`, reporting as a side effect."""

    @jax.custom_batching.custom_vmap
    def report(count, total):
        def call():
            jax.debug.callback(functools.partial(_host_update, desc), count, total, ordered=ordered)

        if every <= 1:
            call()
        else:
            lax.cond((count % every == 0) | (count == total), call, lambda: None)
        return count

    @report.def_vmap
    def report_batched(axis_size, in_batched, count, total):
        count_b, total_b = in_batched
        count = jnp.max(count) if count_b else count
        total = jnp.max(total) if total_b else total
        return report(count, total), False

    return report


@functools.lru_cache(maxsize=None)
def _finisher(desc: str):
    @jax.custom_batching.custom_vmap
    def done(count, after):
        # `after` is only an operand: the callback cannot run before the value it depends on exists.
        jax.debug.callback(lambda c, _: _host_finish(desc, c), count, after)
        return count

    @done.def_vmap
    def done_batched(axis_size, in_batched, count, after):
        count = jnp.max(count) if in_batched[0] else count
        return done(count, jnp.ravel(after)[0] if in_batched[1] else after), False

    return done


def _scalar_of(tree, default):
    """One element of the first numeric leaf of `tree` (a cheap data dependence on all of the loop)."""
    for leaf in jax.tree_util.tree_leaves(tree):
        leaf = jnp.asarray(leaf)
        if not jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key) and leaf.size:
            return jnp.ravel(leaf)[0]
    return default


def every_for(elements_per_iteration: int, elements_per_report: float = 2.0 ** 30) -> int:
    """A power-of-two reporting interval so that each report follows about `elements_per_report` array
    elements of work (2^30: a few tenths of a second of memory traffic on a CPU).

    A host callback costs from ~50 us on an idle machine to several ms on a loaded one, so a loop that
    reads V (N x J) once per iteration should report every ~2^30 / (N J) iterations to stay well under 5%.
    """
    ratio = max(1.0, float(elements_per_report) / max(1, int(elements_per_iteration)))
    return 1 << int(np.ceil(np.log2(ratio)))


def tick(count, total=None, desc: str = "", every: int = 1, ordered: bool = False):
    """Report `count` of `total` units (None: unknown) under `desc` every `every` counts; returns `count`.

    Thread the returned counter through the loop carry. Ticks in one loop body arrive in order; ticks in
    separate computations (a loop, then a tail after it) need `ordered=True`, since XLA may run them in
    any order once it has folded the loop's counter (ordered callbacks are not allowed under `vmap`).
    Traces nothing when progress is off.
    """
    if not is_enabled():
        return count
    count = jnp.asarray(count, jnp.int32)
    total = jnp.asarray(-1 if total is None else total, jnp.int32)
    return _ticker(str(desc), max(1, int(every)), bool(ordered))(count, total)


def finish(count, desc: str = "", after: Any = None):
    """Close `desc`'s bar at `count` (for loops whose total is not known in advance); returns `count`.

    Pass the loop's final state as `after`: with a known trip count XLA folds a loop's counter to a constant,
    and a callback on that constant alone may run while the loop is still ticking.
    """
    if not is_enabled():
        return count
    count = jnp.asarray(count, jnp.int32)
    return _finisher(str(desc))(count, _scalar_of(after, count))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, desc: str = "iterations",
               every: int = 16, total: Optional[int] = None) -> Any:
    """`lax.while_loop` reporting its iteration count every `every` iterations (a plain loop when off)."""
    if not is_enabled():
        return lax.while_loop(cond_fun, body_fun, init_val)

    def body(carry):
        state, count = carry
        return body_fun(state), tick(count + 1, total, desc, every)

    state, count = lax.while_loop(lambda carry: cond_fun(carry[0]), body,
                                  (init_val, jnp.asarray(0, jnp.int32)))
    finish(count, desc, after=state)
    return state


def scan(body_fun: Callable, init: Any, xs: Any = None, length: Optional[int] = None, desc: str = "steps",
         every: Optional[int] = None, **scan_kwargs) -> Any:
    """`lax.scan(body_fun, init, xs, length)` reporting its step count (a plain scan when off).

    For MCMC: `state, draws = progress.scan(step, state, keys, desc="warm-up")`. `every` defaults to
    5% of the steps (20 reports); pass a larger one for cheap steps (see `every_for`).
    """
    if not is_enabled():
        return lax.scan(body_fun, init, xs, length=length, **scan_kwargs)
    steps = length if length is not None else jax.tree_util.tree_leaves(xs)[0].shape[0]
    every = max(1, steps // 20) if every is None else every

    def body(carry, x):
        state, count = carry
        state, y = body_fun(state, x)
        return (state, tick(count + 1, steps, desc, every)), y

    (state, _), ys = lax.scan(body, (init, jnp.asarray(0, jnp.int32)), xs, length=length, **scan_kwargs)
    return state, ys


def bar(iterable: Iterable, desc: str = "", total: Optional[int] = None):
    """tqdm over a Python iterable, silent when progress is off."""
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, disable=not is_enabled(), leave=False, file=sys.stderr,
                dynamic_ncols=True)
