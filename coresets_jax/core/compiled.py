"""Jitted functions whose compiled executables have a bounded footprint (issue 24).

Every XLA:CPU executable maps its code and data into the process: measured with JAX 0.10, about 24 memory
mappings for a small jitted function and 130-570 for one solver loop at one shape (`cj.build` of Frank-Wolfe,
OMP, A-IHT II). A jitted function keeps the executable of every shape it has seen (JAX's cache holds up to
8192), and a function cached by `functools.lru_cache` lives for the whole process. A long process that builds
coresets at many shapes therefore gains ~2,000 mappings per new shape, and at Linux's limit
(`vm.max_map_count`, 65,530 by default) the next compilation fails inside XLA ("LLVM compilation error: Cannot
allocate memory", then a segmentation fault or an abort). Reproduced: every method at sizes 1 and 10 over
random shapes, x64 on, died after 21 shapes with 63,000 mappings (tests/test_stress.py).

`jit(fun, **jit_kwargs)` is `jax.jit` with bookkeeping: each function it returns is remembered in one
least-recently-used list, and after a call that compiled,
  1. while the package's functions hold more than `BUDGET` executables in all, the cache of the
     least-recently-used one is cleared (`clear_cache()`: its mappings are released at once, and a later call
     at that shape compiles again, from the persistent compilation cache when one is set);
  2. on Linux, when the process holds more than half of `vm.max_map_count` mappings (other code's executables,
     eager operations), every function of the package but the current one is cleared, and above three
     quarters JAX's own caches too (`jax.clear_caches()`, with a warning, once).
Calls that hit the cache cost two counter reads. Inside another trace the wrapper is transparent.
"""

from __future__ import annotations

import collections
import functools
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Optional

import jax
from . import caller

__all__ = ["BUDGET", "jit", "live_executables", "mapping_count", "mapping_limit"]

# executables held by the package's jitted functions at once (~600 mappings each at most); the environment
# variable CORESETS_JAX_COMPILED_BUDGET, or assigning compiled.BUDGET, changes it
BUDGET = int(os.environ.get("CORESETS_JAX_COMPILED_BUDGET", 64))
_LOW, _HIGH = 0.5, 0.75  # fractions of vm.max_map_count that trigger the two clean-ups

_lock = threading.RLock()
_live: "collections.OrderedDict[int, weakref.ref]" = collections.OrderedDict()  # least recent first
_warned = False


def mapping_limit() -> Optional[int]:
    """The process's limit on memory mappings (Linux's vm.max_map_count), or None where unknown."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def mapping_count() -> Optional[int]:
    """The number of memory mappings the process holds now (Linux), or None where unknown."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(functools.partial(f.read, 1 << 20), b""))
    except OSError:
        return None


class _Bounded:
    """`jax.jit(fun)` that reports its compilations to the budget (module docstring)."""

    def __init__(self, fun: Callable, legacy_emitters: bool = False, **jit_kwargs: Any):
        from .. import compilation  # here: compilation imports core
        self._jitted = (compilation.emitter_jit if legacy_emitters else jax.jit)(fun, **jit_kwargs)
        functools.update_wrapper(self, fun)
        with _lock:
            _live[id(self)] = weakref.ref(self, functools.partial(_forget, id(self)))

    def _size(self) -> int:
        size = getattr(self._jitted, "_cache_size", None)
        return int(size()) if size is not None else 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = self._size()
        out = self._jitted(*args, **kwargs)
        with _lock:
            if id(self) in _live:
                _live.move_to_end(id(self))
        if self._size() > before:  # this call compiled (or loaded) a new executable
            _after_compile(self)
        return out

    def clear_cache(self) -> None:
        self._jitted.clear_cache()

    def __getattr__(self, name: str) -> Any:  # lower, trace, eval_shape, ...
        return getattr(self._jitted, name)


def _forget(key: int, _ref: Any = None) -> None:
    with _lock:
        _live.pop(key, None)


def jit(fun: Optional[Callable] = None, **jit_kwargs: Any):
    """`jax.jit` whose executables count towards the package's budget; also a decorator (with or without
    keyword arguments, e.g. `@jit(static_argnames=("k",))`). `legacy_emitters=True`: compiled as
    `compilation.emitter_jit` (XLA:CPU's classic fusion emitters where the call compiles for a CPU)."""
    if fun is None:
        return lambda f: _Bounded(f, **jit_kwargs)
    return _Bounded(fun, **jit_kwargs)


def _functions() -> list:
    """The live wrapped functions, least recently used first."""
    with _lock:
        refs = list(_live.values())
    return [f for f in (r() for r in refs) if f is not None]


def live_executables() -> int:
    """Executables held by the package's jitted functions now."""
    return sum(f._size() for f in _functions())


def _after_compile(current: _Bounded) -> None:
    global _warned
    functions = _functions()
    total = sum(f._size() for f in functions)
    for f in functions:  # least recently used first; never the function just called
        if total <= BUDGET:
            break
        if f is not current:
            total -= f._size()
            f.clear_cache()
    limit, count = mapping_limit(), mapping_count()
    if limit is None or count is None or count <= _LOW * limit:
        return
    for f in functions:
        if f is not current:
            f.clear_cache()
    count = mapping_count() or 0
    if count > _HIGH * limit:
        jax.clear_caches()
        if not _warned:
            _warned = True
            warnings.warn(f"coresets_jax: this process held {count} memory mappings, close to the system's limit "
                          f"of {limit} (vm.max_map_count), mostly compiled XLA executables; JAX's compilation "
                          "caches were cleared so that the next compilation does not crash. Functions will "
                          "compile again when next called.", RuntimeWarning,
                          stacklevel=caller.stacklevel())
