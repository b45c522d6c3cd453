"""The kernel registry: each sampler as a BlackJAX `SamplingAlgorithm` built from a density and its tuning.

A kernel is described once by a `KernelSpec`: how to build the `SamplingAlgorithm` from `(logdensity_fn,
Tuning, settings)`, its default settings, which preconditioner it adapts (a diagonal inverse mass matrix,
tuned by Stan's window adaptation, for NUTS/HMC; a Cholesky factor, tuned by `warmup.run_warmup`, for
MALA/RWMH), and how many gradient evaluations a step cost. Adding a
sampler is one `register_kernel` call; warm-up (`warmup.py`) and the chain driver (`driver.py`) read the
spec and need no change.

- "nuts", "hmc": BlackJAX's own kernels; HMC draws its step size from h U(1 - j, 1 + j) per transition
  (`step_jitter` j), which breaks resonance with the target (Neal 2011, §5.4).
- "mala": preconditioned MALA (LR §4, App. E), target acceptance 0.574.
- "rwmh": Gaussian random walk with adapted covariance (HC §7.3), target acceptance 0.234.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import blackjax
import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm, build_sampling_algorithm

from . import mala as _mala
from . import rwmh as _rwmh

__all__ = ["KERNELS", "KernelSpec", "Tuning", "build", "check_settings", "initial_tuning", "register_kernel"]

Array = jax.Array


class Tuning(NamedTuple):
    """A kernel's adapted parameters.

    step_size: scalar step size (MALA/RWMH: the global proposal scale).
    precond: (D,) diagonal inverse mass matrix (NUTS/HMC) or (D, D) lower Cholesky factor of the proposal
      covariance (MALA/RWMH).
    """

    step_size: Array
    precond: Array


class KernelSpec(NamedTuple):
    """How to build, tune and account for one sampler.

    build: `(logdensity_fn, tuning, settings) -> SamplingAlgorithm`.
    defaults: settings with their defaults (`initial_step_size=None` means a dimension-based default).
    precond: "diagonal" or "cholesky".
    gradient_evals: `info -> number of gradient evaluations of the step` (its cost).
    reference_step_size: `D -> scale` that Metropolis adaptation restarts from (Roberts & Rosenthal 2001).
    """

    build: Callable[[Callable, Tuning, dict], SamplingAlgorithm]
    defaults: dict
    precond: str
    gradient_evals: Callable[[Any], Array]
    reference_step_size: Optional[Callable[[int], float]] = None


def _jittered_hmc_kernel(rng_key, state, logdensity_fn, step_size, inverse_mass_matrix, num_steps, jitter):
    k_jitter, k_step = jax.random.split(rng_key)
    u = jax.random.uniform(k_jitter, (), minval=1.0 - jitter, maxval=1.0 + jitter)
    return blackjax.mcmc.hmc.build_kernel()(k_step, state, logdensity_fn, step_size * u, inverse_mass_matrix,
                                            num_steps)


def _build_nuts(logdensity_fn, tuning: Tuning, settings: dict) -> SamplingAlgorithm:
    return blackjax.nuts(logdensity_fn, tuning.step_size, tuning.precond,
                         max_num_doublings=int(settings["max_num_doublings"]))


def _build_hmc(logdensity_fn, tuning: Tuning, settings: dict) -> SamplingAlgorithm:
    return build_sampling_algorithm(
        _jittered_hmc_kernel, blackjax.mcmc.hmc.init, logdensity_fn,
        kernel_args=(tuning.step_size, tuning.precond, int(settings["num_integration_steps"]),
                     float(settings["step_jitter"])))


KERNELS: dict[str, KernelSpec] = {}


def register_kernel(name: str, spec: KernelSpec) -> KernelSpec:
    """Add a sampler; `cj.sample(method=name)` and every construction can then use it."""
    if not isinstance(spec, KernelSpec):
        raise ValueError(f"spec: expected a KernelSpec, got {type(spec).__name__}")
    if spec.precond not in ("diagonal", "cholesky"):
        raise ValueError(f"spec.precond: expected 'diagonal' or 'cholesky', got {spec.precond!r}")
    if spec.precond == "cholesky" and spec.reference_step_size is None:
        raise ValueError("spec.reference_step_size: a 'cholesky' kernel needs it (the scale that its warm-up "
                         "restarts from after each covariance estimate)")
    KERNELS[name] = spec
    return spec


register_kernel("nuts", KernelSpec(
    _build_nuts, {"target_accept": 0.8, "max_num_doublings": 10, "initial_step_size": 1.0}, "diagonal",
    lambda info: jnp.asarray(info.num_integration_steps, jnp.int32)))
register_kernel("hmc", KernelSpec(
    _build_hmc, {"target_accept": 0.8, "num_integration_steps": 10, "initial_step_size": 1.0,
                 "step_jitter": 0.2}, "diagonal",
    lambda info: jnp.asarray(info.num_integration_steps, jnp.int32)))
register_kernel("mala", KernelSpec(
    lambda ld, t, s: _mala.mala(ld, t.step_size, t.precond), {"target_accept": 0.574, "initial_step_size": None},
    "cholesky", lambda info: jnp.asarray(1, jnp.int32), lambda d: 1.65 * d ** (-1.0 / 6.0)))
register_kernel("rwmh", KernelSpec(
    lambda ld, t, s: _rwmh.rwmh(ld, t.step_size, t.precond), {"target_accept": 0.234, "initial_step_size": None},
    "cholesky", lambda info: jnp.asarray(0, jnp.int32), lambda d: 2.38 / math.sqrt(d)))


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    return value


def check_settings(method: str, settings: dict) -> dict:
    """The method's settings with defaults filled in; ValueError for an unknown or impossible setting."""
    if method not in KERNELS:
        raise ValueError(f"method: unknown value {method!r}; expected one of {sorted(KERNELS)}")
    spec = KERNELS[method]
    out = dict(spec.defaults)
    for name, value in settings.items():
        if name not in out:
            raise ValueError(f"{name}: not a setting of method {method!r}; its settings are {list(out)}")
        if isinstance(value, (list, dict, jax.Array)) or hasattr(value, "__array__"):
            raise ValueError(f"{name}: settings must be plain Python scalars, got {type(value).__name__}")
        out[name] = value
    target = out["target_accept"]
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < target < 1.0:
        raise ValueError(f"target_accept: must lie in (0, 1), got {target!r}")
    step = out["initial_step_size"]
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float))
                             or not math.isfinite(step) or step <= 0):
        raise ValueError(f"initial_step_size: must be a positive finite number, got {step!r}")
    if "max_num_doublings" in out:
        _positive_int(out["max_num_doublings"], "max_num_doublings")
    if "num_integration_steps" in out:
        _positive_int(out["num_integration_steps"], "num_integration_steps")
    if "step_jitter" in out and not (isinstance(out["step_jitter"], (int, float)) and 0.0 <= out["step_jitter"] < 1.0):
        raise ValueError(f"step_jitter: must lie in [0, 1), got {out['step_jitter']!r}")
    return out


def initial_tuning(method: str, init_cov: Array, settings: dict) -> Tuning:
    """The tuning warm-up starts from: the diagonal of `init_cov` (NUTS/HMC) or its Cholesky factor."""
    spec = KERNELS[method]
    d = init_cov.shape[0]
    step = settings["initial_step_size"]
    if step is None:
        step = spec.reference_step_size(d) if spec.reference_step_size is not None else 1.0
    precond = jnp.diag(init_cov) if spec.precond == "diagonal" else jnp.linalg.cholesky(init_cov)
    return Tuning(jnp.asarray(step, init_cov.dtype), precond)


def build(method: str, logdensity_fn: Callable, tuning: Tuning, settings: dict) -> SamplingAlgorithm:
    """The `SamplingAlgorithm` of `method` for this density and tuning (settings as from `check_settings`)."""
    return KERNELS[method].build(logdensity_fn, tuning, settings)
