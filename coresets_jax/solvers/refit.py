"""Weight refit on a fixed support: min_{w >= 0, supp w ⊆ S} ||sum_n v_n - V^T w||^2 (NNLS on V).

The reference library's `optimize()`: any construction's support can be kept and its weights re-solved.
Available as `cj.refit(V, coreset)` and as `cj.build(..., refit=True)`.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from ..core import validate as _validate
from ..core import Coreset
from .base import make_problem
from .ops import refit_support
from ..core import compiled as _compiled_fns
from ..compilation import full_precision

__all__ = ["refit", "refit_arrays"]


@functools.lru_cache(maxsize=64)
def _compiled(max_iter: int, tol: float):
    @_compiled_fns.jit
    def solve(V, indices, weights):
        _, w, res = refit_support(make_problem(V), indices, weights, max_iter, tol)
        return w, res.iterations, res.kkt

    return solve


def refit_arrays(V: jax.Array, indices: jax.Array, weights: jax.Array, max_iter: int = 1000,
                 tol: float = 1e-6) -> tuple[jax.Array, dict]:
    """Unvalidated refit for internal callers (`build`): returns (weights, info)."""
    w, iterations, kkt = _compiled(int(max_iter), float(tol))(V, indices, weights)
    return w, {"refit_iterations": iterations, "refit_kkt": kkt}


@full_precision
def refit(V: Any, coreset: Coreset, *, max_iter: int = 1000, tol: float = 1e-6) -> Coreset:
    """Re-solve the weights of `coreset` on its own support (rows with weight > 0) by NNLS on V.

    Args:
      V: the projected vectors (N, J) the coreset approximates.
      coreset: a `Coreset` of rows of V.
      max_iter, tol: NNLS iteration cap and KKT tolerance (relative), see `solvers.ops.nnls_gram`.

    Returns:
      A `Coreset` with the same indices and capacity; rows may drop out (weight 0), none are added. Its
      info gains `refit_iterations` and `refit_kkt`.
    """
    V = _validate.check_matrix(V, "V")
    if not isinstance(coreset, Coreset):
        raise ValueError(f"coreset: expected a cj.Coreset, got {type(coreset).__name__}")
    indices = jnp.asarray(coreset.indices)
    if indices.size and (int(jnp.min(indices)) < 0 or int(jnp.max(indices)) >= V.shape[0]):
        raise ValueError(f"coreset: indices must lie in [0, N = {V.shape[0]}) of V")
    max_iter = _validate.check_positive_int(max_iter, "max_iter")
    tol = _validate.check_nonneg_float(tol, "tol")
    weights, info = refit_arrays(V, indices, jnp.asarray(coreset.weights), max_iter, tol)
    return Coreset(indices, weights, dict(coreset.info, **info), coreset.method)
