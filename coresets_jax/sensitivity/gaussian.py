"""The sensitivity coreset of the Gaussian mean model, HC §6 (Eq. 6.3): HC's "Unif" baseline."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..core import Coreset
from ..core import validate as _validate
from ..core import compiled
from .sampling import sensitivity_sample

__all__ = ["gaussian_mean_coreset", "gaussian_mean_sensitivity", "gaussian_mean_sensitivity_core"]

Array = jax.Array


@compiled.jit
def gaussian_mean_sensitivity_core(y: Array) -> Array:
    """The pure core of `gaussian_mean_sensitivity` (HC Eq. 6.3): jitted, vmappable over datasets, no checks
    (identical rows give NaN)."""
    n = y.shape[0]
    ybar = jnp.mean(y, axis=0)
    dev = jnp.sum(jnp.square(y - ybar), 1)
    spread = jnp.mean(dev)  # = mean ||y||^2 - ||ybar||^2 (HC Eq. C.2), without the cancellation
    return (1.0 + dev / spread) / n


def gaussian_mean_sensitivity(y: Any) -> Array:
    """HC Eq. 6.3 (derived in HC App. C): sigma_n = (1/N)(1 + ||y_n - ybar||^2 / (mean ||y||^2 - ||ybar||^2)).

    The sensitivity of observation y_n for the mean of N(mu, I) data. sum_n sigma_n = 2 for every dataset,
    since the second term averages to 1.
    """
    y = _validate.check_matrix(y, "y")
    if y.shape[0] < 2:
        raise ValueError(f"y: needs at least 2 rows, got {y.shape[0]}")
    y = y.astype(jnp.promote_types(y.dtype, jnp.float32))
    sens = gaussian_mean_sensitivity_core(y)
    if not bool(jnp.all(jnp.isfinite(sens))):
        raise ValueError("y: all rows are identical, so the sensitivity (Eq. 6.3) is undefined")
    return sens


def gaussian_mean_coreset(y: Any, size: int, key: Array) -> Coreset:
    """HC §6's "Unif" baseline: the uniform (sensitivity) coreset of Eq. 2.5 with Eq. 6.3's sensitivities."""
    y = _validate.check_matrix(y, "y")
    size = _validate.check_size(size, y.shape[0])
    return sensitivity_sample(gaussian_mean_sensitivity(y), size, key, method="unif")
