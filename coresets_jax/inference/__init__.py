"""Inference on a coreset: MCMC on the weighted posterior pi_w (HC §2), in layers.

- the density: `coresets_jax.core.weighted_log_density` (defined once, for every stage);
- `kernels`: the registry of BlackJAX `SamplingAlgorithm`s (NUTS, HMC, MALA, RWMH) and their `Tuning`;
- `warmup`: adaptation of a kernel's tuning, separate from sampling;
- `driver`: `sample_fn` (the pure core of `cj.sample`) and `init_chains`/`step_chains` for constructions
  that step persistent chains against a changing density;
- `posterior`: the `Posterior` result and its diagnostics; `sample`: the public entry point `cj.sample`.
"""

from . import kernels, mala, rwmh, warmup
from .driver import SamplerStats, init_chains, sample_fn, step_chains
from .kernels import KERNELS, KernelSpec, Tuning, register_kernel
from .posterior import Posterior, check_diagnostics
from .sample import METHODS, sample, trace_count


__all__ = [
    "KERNELS",
    "KernelSpec",
    "METHODS",
    "Posterior",
    "SamplerStats",
    "Tuning",
    "check_diagnostics",
    "init_chains",
    "kernels",
    "mala",
    "register_kernel",
    "rwmh",
    "sample",
    "sample_fn",
    "step_chains",
    "trace_count",
    "warmup",
]
