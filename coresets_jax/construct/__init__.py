"""Public construction entry points, each = validate, then a pure core, then check.

- `vectors`: `build_fn(method, size, **options)`, the pure core on projected vectors, `(V, key) -> Coreset`,
  which jits and vmaps (over keys and over a batch of V); `build(V, size, method, key, ...)`, which validates,
  optionally compresses V (a host decision), runs the core and raises if it reported non-finite weights;
  `relative_error` (HC Eq. 3.2).
- `posterior`: `coreset_fn(model, method, size, **options)`, the pure core of a posterior-driven method,
  `(key, data, start, data_weights=None) -> Coreset`; the start from pi_hat (`resolve_pi_hat`, `start_from`),
  read in one place for `coreset`, `merged_coreset` and `stream_coreset`.
- `pipeline`: `coreset(model, data, size, method, key, ...)`, the whole pipeline of HC Algorithm 3 (pi_hat,
  projection, solver) for vector methods, or pi_hat then the posterior-driven core.

Methods are looked up in `coresets_jax.registry` by name, or passed as a `cj.Construction`.
"""

from ..registry import METHODS, POSTERIOR_METHODS
from .pipeline import coreset
from .posterior import coreset_fn
from .vectors import build, build_fn, relative_error

__all__ = ["METHODS", "POSTERIOR_METHODS", "build", "build_fn", "coreset", "coreset_fn", "relative_error"]
