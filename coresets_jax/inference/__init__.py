"""Inference on a coreset: MCMC on the weighted posterior pi_w (HC §2).

`sample` is the public entry point (exported as `cj.sample`); `sample_weighted_fn` is its jittable core for
callers that draw from pi_w inside their own jitted code (e.g. Sparse VI). `mala` and `rwmh` are the
BlackJAX-style kernels this package adds; NUTS and HMC come from BlackJAX.
"""

from . import mala, rwmh
from .sample import (
    DEFAULT_SETTINGS,
    METHODS,
    Posterior,
    SamplerStats,
    sample,
    sample_weighted_fn,
    sample_weighted_fn as sample_fn,
    trace_count,
    weighted_logdensity,
)

__all__ = [
    "DEFAULT_SETTINGS",
    "METHODS",
    "Posterior",
    "SamplerStats",
    "mala",
    "rwmh",
    "sample",
    "sample_fn",
    "sample_weighted_fn",
    "trace_count",
    "weighted_logdensity",
]
