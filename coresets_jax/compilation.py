"""Compiling less, and keeping what is compiled.

**The persistent compilation cache.** On a CPU most of a first call is XLA compilation (about 2-10 s for a
coreset or a sampler), which JAX can keep on disk and reuse in later processes. Importing coresets_jax
switches JAX's persistent cache on, in the user's cache folder:

    $XDG_CACHE_HOME/coresets_jax/jax   (default ~/.cache/coresets_jax/jax; on Windows %LOCALAPPDATA%,
                                         on macOS ~/Library/Caches)

unless one of these holds, in which case nothing is changed:
- the environment variable CORESETS_JAX_NO_CACHE is set to 1 (or true, yes, on): the opt-out;
- the user configured a cache already: JAX_COMPILATION_CACHE_DIR, or `jax.config.jax_compilation_cache_dir`
  set before the import.
`cj.compilation_cache(path)` moves it, `cj.compilation_cache(None)` switches it off for this process, and
`cj.compilation_cache()` tells where it is. With the cache on, programs that took at least
`MIN_COMPILE_TIME` seconds to compile are written (JAX's own default, 1 s, would skip most of ours) unless
the user set `jax_persistent_cache_min_compile_time_secs`.

Several processes may share the folder: JAX names each entry by a hash of the program, the compiler and its
options, and writes it whole or not at all as far as a reader can tell (a torn read is reported by JAX as a
warning and compiled afresh, never used); `tests/test_compilation_cache.py` runs two processes that fill an
empty cache at once. Under `jax.distributed`, JAX writes entries from process 0 only; the other processes
read the folder of their own host (a shared file system makes process 0's entries visible to all). JAX
does not write programs that hold host callbacks, such as the progress bars of long runs. The cache is
trusted code: keep it in a folder only you can write (it is created with mode 0700).

**Fewer, cheaper compilations.** `FAST_COMPILE` and `fast_jit`: XLA options for programs whose run time is
negligible next to their compilation (a few thousand random draws, a key split, a Laplace fit on a
coreset's rows before sampling). LLVM's optimisation passes are most of a small program's compile time on a
CPU: without them `normal` + `randint` compile in about half the time (0.57 s against 1.1 s) and still run
in microseconds. Programs whose run time matters keep XLA's defaults (LLVM -O1 made Coreset MCMC 4x slower).

**Full float32 dot products on every backend.** JAX computes float32 matrix products on recent NVIDIA GPUs
(A100, H100, H200) in TensorFloat-32 by default, with each operand rounded to 10 mantissa bits, and on TPUs
in bfloat16 (docs.jax.dev, "Matmul precision"). A model's `X @ theta` then sees theta on a grid of relative
spacing about 1e-3 whatever N, while the posterior sd shrinks as N^-1/2: at N = 10^6 rows of a logistic
regression (D = 10) the grid is a sizeable fraction of the posterior sd, and the log density moves by tenths
of a nat between nearby draws (benchmarks/investigations/tf32_emulation.py). Every public function that
evaluates a model or solves on vectors therefore runs, and is traced, under
`jax.default_matmul_precision(MATMUL_PRECISION)` ("float32": full float32 products), through
`full_precision`; the functions that `*_fn` factories return carry it too, so a user's own `jit` of them
gets the same programs. On a CPU, float32 products are full float32 anyway: nothing changes there. Set
`MATMUL_PRECISION = None` to leave JAX's default (and any precision the caller set) in force.

**XLA's classic CPU fusion emitters for the programs whose run time does not mind them.** `LEGACY_EMITTERS`
(`xla_cpu_use_fusion_emitters: False`) makes XLA:CPU generate its fused loops with the emitters it used before
its MLIR-based ones, which compile much faster: the projection's program in 0.2 s instead of 1.1-1.4 s, OMP's
in about 1.2 s instead of 2.0 s, a coreset's NUTS sampler in 0.8-0.9 s instead of 1.6-2.0 s. Their code is as
fast on some programs and slower on others, so they are used only where that was measured to cost little
(benchmarks/investigations/cpu_emitters.py, results/cpu_emitters.json, fresh processes): the projection and
OMP (compiled calls 0.95-1.07x on logistic and Poisson regression at N = 5e5, D = 50 at 2e5 and two tiled
real files, the same coresets; GIGA and A-IHT II round otherwise under them and keep XLA's defaults,
`construct.vectors.LEGACY_EMITTER_METHODS`), the programs compiled by `fast_jit`, a coreset's sampler
and its starting points where rows x D <= `inference.sample.LEGACY_LOOP_WORK` (compiled calls 1.09-1.15x,
first calls 0.58-0.66x), and the certificate's brief programs: its screen, the coreset's term and the audits
(`certification.passes.LEGACY_CERTIFICATE`: a first `cj.certify` at N = 5e5 0.63-0.67 s against 0.80-0.88 s).
vs_peers' fixed route at N = 5e5 took 0.82-0.83x of its first-call time. Left on XLA's defaults: the data
passes of the Laplace fit (2.3x slower compiled on Poisson regression), the certificate's full passes over
N x S (1.45x), full-data chains (2.7x), larger coresets' chains (1.15-1.2x) and the posterior-driven loops.
`emitter_jit` applies them to a program that compiles for a CPU; on other platforms, and with the environment variable
CORESETS_JAX_LEGACY_EMITTERS=0, programs compile with XLA's defaults. So they do where this jaxlib's XLA:CPU no
longer has the option (JAX 0.11 refuses every program that names it: "No such compile option"): the first
refusal is recorded (`legacy_emitters()`), and that program and every later one compile with XLA's defaults.

`LOOP_COMPILE`: XLA options for the loop programs (the sampler of `cj.sample`, the posterior-driven cores),
empty: XLA's defaults. Level 1 instead of 2 was measured in fresh processes on the N = 569 problem of
cold_start.py and on N = 10^5 full-data sampling (benchmarks/investigations/compile_level.py,
results/compile_level.json, 2 repeats on a quiet machine): first calls 0.95-1.05x, compiled calls 1.0-1.25x
(noisy), so no gain to keep; an earlier reading of 12-20% faster first calls came from a contended machine.
The knob stays for other backends and for that benchmark; `loop_jit_options()` reads it per program.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import jax
from jax.experimental.compilation_cache import compilation_cache as _jax_cache

__all__ = ["ENV_NO_CACHE", "FAST_COMPILE", "LEGACY_EMITTERS", "LOOP_COMPILE", "MATMUL_PRECISION", "MIN_COMPILE_TIME",
           "PREFETCH", "Prefetched", "compilation_cache", "default_cache_dir", "emitter_jit", "fast_jit",
           "full_precision", "full_precision_factory", "legacy_emitters", "loop_jit_options", "prefetch"]

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
LOOP_COMPILE: dict = {}
# XLA:CPU's classic fusion emitters (docstring); emptied by CORESETS_JAX_LEGACY_EMITTERS=0
LEGACY_EMITTERS: dict = ({} if os.environ.get("CORESETS_JAX_LEGACY_EMITTERS", "1") == "0"
                         else {"xla_cpu_use_fusion_emitters": False})
ENV_NO_CACHE = "CORESETS_JAX_NO_CACHE"
MATMUL_PRECISION: Optional[str] = "float32"  # jax_default_matmul_precision inside the package (docstring)
MIN_COMPILE_TIME = 0.0  # seconds; every program we compile is worth keeping (a cache read is milliseconds)
_JAX_DEFAULT_MIN_COMPILE_TIME = 1.0
_UNSET = object()
# Compile a program in a background thread while the data pass before it runs (`prefetch`); the environment
# variable CORESETS_JAX_PREFETCH=0, or assigning compilation.PREFETCH = False, turns it off.
PREFETCH = os.environ.get("CORESETS_JAX_PREFETCH", "1") != "0"


def full_precision(fun: Callable) -> Callable:
    """`fun` called, and so traced, under `jax.default_matmul_precision(MATMUL_PRECISION)` (module docstring).
    JAX reads the setting when it traces a product and keys its compiled programs by it.

    Every public function is wrapped so, which makes this the one place where its concrete inputs sharded
    over a mesh with Explicit axes (`jax.make_mesh`'s default) move onto that mesh with Auto axes
    (`core.mesh.on_auto_mesh`; no data moves between devices)."""

    @functools.wraps(fun)
    def call(*args, **kwargs):
        from .core.mesh import on_auto_mesh  # here: core imports this module
        args, kwargs = on_auto_mesh((args, kwargs))
        if MATMUL_PRECISION is None:
            return fun(*args, **kwargs)
        with jax.default_matmul_precision(MATMUL_PRECISION):
            return fun(*args, **kwargs)

    return call


def full_precision_factory(factory: Callable) -> Callable:
    """A `*_fn` factory whose returned function runs under `full_precision` wherever it is called or traced."""

    @functools.wraps(factory)
    def make(*args, **kwargs):
        return full_precision(factory(*args, **kwargs))

    return make


def loop_jit_options() -> dict:
    """`jax.jit` keyword arguments for a loop program: `compiler_options=LOOP_COMPILE` when it is not empty.
    Loop programs are compiled from the top level only (`cj.sample`, `cj.coreset`), where JAX accepts them."""
    return {"compiler_options": dict(LOOP_COMPILE)} if LOOP_COMPILE else {}


def fast_jit(fun: Callable, **jit_kwargs) -> Callable:
    """`jax.jit(fun, compiler_options=FAST_COMPILE)` when called from the top level (with `LEGACY_EMITTERS` too
    where it compiles for a CPU: `emitter_jit`); inside another `jit` (where JAX refuses compiler options) the
    plain `jax.jit(fun)`, which the outer program inlines."""
    return _EmitterJit(fun, compiler_options=FAST_COMPILE, **jit_kwargs)


_REFUSED: set = set()  # LEGACY_EMITTERS' items that this process's XLA:CPU refused


def legacy_emitters() -> dict:
    """`LEGACY_EMITTERS`, or {} (XLA's defaults) once this jaxlib's XLA:CPU has refused them. XLA reads a
    program's options when it compiles it and refuses an unknown one before any work, so the first program
    compiled with them is the test: `_EmitterJit` then records the refusal and compiles that program, and every
    later one, with XLA's defaults. Nothing is compiled only to ask."""
    options = dict(LEGACY_EMITTERS)
    return {} if not options or tuple(sorted(options.items())) in _REFUSED else options


def _refused(err: Exception) -> bool:
    """Whether `err` is XLA refusing `LEGACY_EMITTERS` (JAX 0.11: "No such compile option"); if so, recorded."""
    text = str(err)
    if not isinstance(err, jax.errors.JaxRuntimeError) or "compile option" not in text \
            or not any(name in text for name in LEGACY_EMITTERS):
        return False
    _REFUSED.add(tuple(sorted(LEGACY_EMITTERS.items())))
    return True


def _compiles_for_cpu(args: Any) -> bool:
    """Whether a program called on `args` compiles for a CPU: every array (or ShapeDtypeStruct with a sharding)
    lives on CPU devices, or, with none, JAX's default backend is the CPU. False inside another trace (there
    the program is inlined and takes no options of its own)."""
    devices = []
    for leaf in jax.tree_util.tree_leaves(args):
        if isinstance(leaf, jax.core.Tracer):
            return False
        if isinstance(leaf, jax.Array):
            devices.extend(leaf.devices())
        elif isinstance(leaf, jax.ShapeDtypeStruct) and getattr(leaf, "sharding", None) is not None:
            devices.extend(leaf.sharding.device_set)
    try:
        return all(d.platform == "cpu" for d in devices) if devices else jax.default_backend() == "cpu"
    except RuntimeError:
        return False


class _EmitterJit:
    """`jax.jit(fun)` that compiles with `LEGACY_EMITTERS` where the call compiles for a CPU (`emitter_jit`)."""

    def __init__(self, fun: Callable, **jit_kwargs: Any):
        self._options = dict(jit_kwargs.pop("compiler_options", None) or {})
        self._fun, self._jit_kwargs = fun, jit_kwargs
        self._nested = jax.jit(fun, **jit_kwargs)  # inside another trace: inlined, no options of its own
        self._plain = jax.jit(fun, compiler_options=self._options, **jit_kwargs) if self._options else self._nested
        self._with_emitters: dict = {}  # the options in force (`legacy_emitters()`) -> the jit compiled with them
        functools.update_wrapper(self, fun)

    @property
    def _legacy(self) -> Callable:
        """The jit with the classic emitters that `legacy_emitters()` gives now (the plain one when none)."""
        options = legacy_emitters()
        if not options:
            return self._plain
        key = tuple(sorted(options.items()))
        if key not in self._with_emitters:
            self._with_emitters[key] = jax.jit(self._fun, compiler_options={**self._options, **options},
                                               **self._jit_kwargs)
        return self._with_emitters[key]

    def _jits(self) -> tuple:
        every = (self._nested, self._plain, *self._with_emitters.values())
        return tuple({id(j): j for j in every}.values())

    def _pick(self, args: Any, kwargs: Any) -> Callable:
        return self._legacy if _compiles_for_cpu((args, kwargs)) else self._plain

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        jitted = self._pick(args, kwargs)
        try:
            return jitted(*args, **kwargs)
        except ValueError as err:  # inside another trace on concrete arguments: JAX refuses compiler options
            if jitted is self._nested or "compiler_options" not in str(err):
                raise
            return self._nested(*args, **kwargs)
        except jax.errors.JaxRuntimeError as err:  # this XLA:CPU has no such option (`legacy_emitters`)
            if jitted is self._plain or not _refused(err):
                raise
            return self._plain(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._pick(args, kwargs).lower(*args, **kwargs)

    def _cache_size(self) -> int:
        return sum(int(j._cache_size()) for j in self._jits())

    def clear_cache(self) -> None:
        for j in self._jits():
            j.clear_cache()

    def __getattr__(self, name: str) -> Any:  # trace, eval_shape, ...
        return getattr(self._nested, name)


def emitter_jit(fun: Optional[Callable] = None, **jit_kwargs: Any):
    """`jax.jit(fun, **jit_kwargs)`, compiled with `LEGACY_EMITTERS` where a call compiles for a CPU (module
    docstring), with XLA's defaults elsewhere and inside another trace; also a decorator (with or without
    keyword arguments)."""
    if fun is None:
        return lambda f: _EmitterJit(f, **jit_kwargs)
    return _EmitterJit(fun, **jit_kwargs)


class Prefetched:
    """A compilation started by `prefetch` or `compile_ahead`; `wait()` joins it (call it before the program
    itself, so that the call finds the executable instead of compiling a second copy). Errors stay in the
    thread: the call itself then compiles and raises them where they belong."""

    def __init__(self, thread: Optional[threading.Thread] = None):
        self._thread = thread

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def prefetch(jitted: Callable, *args: Any, **kwargs: Any) -> Prefetched:
    """Compile `jitted` (a `jax.jit` function) for `args` (arrays or `jax.ShapeDtypeStruct`s) in a background
    thread, under this thread's x64 and matmul-precision settings (JAX keys its programs by them), so that a
    later call at those shapes finds it compiled: `jitted.lower(*args).compile()` fills the same cache.

    Why: XLA compiles a program on one core, and a cold `cj.coreset` compiled its solver (2 s for OMP on a
    CPU) only after the projection's data pass, which had the other cores. Overlapping them saves up to the
    shorter of the two. Only for programs that trace no user model: NumPyro's effect handlers keep a global
    stack, so a model must never be traced in two threads at once. A no-op with one CPU or PREFETCH off."""
    if not hasattr(jitted, "lower"):
        return Prefetched()
    x64, matmul = jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision

    def task():
        with jax.enable_x64(x64), jax.default_matmul_precision(matmul):
            jitted.lower(*args, **kwargs).compile()

    return _in_background(task, "coresets_jax-prefetch")


def compile_ahead(jitted: Callable, *args: Any, **kwargs: Any) -> Prefetched:
    """Lower `jitted` for `args` (arrays or `jax.ShapeDtypeStruct`s, as the later call will pass them) here, in
    the caller's thread, and compile it in a background thread (`compile_lowered`). Tracing stays in the
    caller's thread, so the program may trace a user model; a caller with several programs to run one after
    another lowers them all first, and they compile at once on the free cores (on 2 cores a first `cj.certify`
    by the audited screen took 0.81 s where its four programs compiled one after another took 1.00 s). A
    program that fails to lower is left to its call, which raises the error where it belongs. Nothing, not even
    the lowering, with prefetching off or one CPU. `wait()` before the call."""
    if not PREFETCH or (os.cpu_count() or 1) < 2 or not hasattr(jitted, "lower"):
        return Prefetched()
    try:
        lowered = jitted.lower(*args, **kwargs)
    except Exception:  # noqa: BLE001 (the call itself raises it)
        return Prefetched()
    return compile_lowered(lowered)


def compile_lowered(lowered: Any) -> Prefetched:
    """Compile an already lowered program (`jitted.lower(...)`, traced in the caller's thread, so a program
    that traces a user model may use it) in a background thread; the later call at the same shapes finds the
    executable. The same conditions as `prefetch`."""
    return _in_background(lowered.compile, "coresets_jax-compile")


def _in_background(task: Callable[[], Any], name: str) -> Prefetched:
    """Run `task` in a daemon thread (a no-op with one CPU or PREFETCH off). Its errors stay there: the call
    that needs the program compiles it again and raises them in the caller's thread."""
    if not PREFETCH or (os.cpu_count() or 1) < 2:
        return Prefetched()

    def run():
        try:
            task()
        except Exception as err:  # noqa: BLE001 (the call itself raises it, in the caller's thread)
            _refused(err)  # XLA:CPU refusing the classic emitters: the later programs leave them out

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return Prefetched(thread)


def default_cache_dir() -> Path:
    """The folder the package keeps JAX's compilation cache in: <user cache folder>/coresets_jax/jax."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base and sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
    if not base and sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches")
    if not base:
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "coresets_jax" / "jax"


def _truthy(value: Optional[str]) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def compilation_cache(path: Any = _UNSET) -> Optional[str]:
    """Where JAX's persistent compilation cache is, and set it.

    `cj.compilation_cache()` returns the folder in use (None when off); `cj.compilation_cache(path)` keeps
    compiled programs in `path` from now on (created if needed); `cj.compilation_cache(None)` switches the
    persistent cache off for this process. See the module docstring for the default.
    """
    if path is _UNSET:
        return jax.config.jax_compilation_cache_dir
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"path: expected a folder (str or os.PathLike) or None, got {type(path).__name__}")
        path = Path(path).expanduser()
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = str(path)
        if jax.config.jax_persistent_cache_min_compile_time_secs == _JAX_DEFAULT_MIN_COMPILE_TIME \
                and "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME)
    jax.config.update("jax_compilation_cache_dir", path)
    _jax_cache.reset_cache()  # JAX opens its cache once; a new folder takes effect from the next compilation
    return path


def _enable_default() -> Optional[str]:
    """At import: the default cache, unless opted out or the user configured one (module docstring)."""
    if _truthy(os.environ.get(ENV_NO_CACHE)):
        return None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir is not None:
        return None
    try:
        return compilation_cache(default_cache_dir())
    except OSError:  # an unwritable home: run without the cache rather than fail to import
        return None
