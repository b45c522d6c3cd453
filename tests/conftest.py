"""Shared test set-up.

Tiers are marked at each test (or with a module's `pytestmark`): `-m "not slow"` is the fast set a developer
runs (the README's command); `slow` holds the statistical and compile-heavy tests (over a few seconds each on
this 2-core machine, by `--durations`); `bench` the benchmarks' quick runs; `extended` the heaviest slow tests.
CI runs every tier (.ci/run).
"""

import os
from pathlib import Path

# A persistent XLA compilation cache shared by the xdist workers, the subprocess tests and later runs: the
# suite is compile-bound, and a warm cache makes a re-run about 3x faster (measured in README.md). A user's
# own JAX_COMPILATION_CACHE_DIR wins. Set before jax is imported, so subprocesses inherit it too.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

