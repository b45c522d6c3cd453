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
- "slice": preconditioned hit-and-run slice sampling (Neal 2003; `slice.py`), as Chen & Campbell run
  Coreset MCMC: nothing to tune beyond a covariance, so it stays exact while the target moves.

A kernel states its own facts in its spec: its settings (`defaults`) and their checks, which setting holds
the scale warm-up starts from (`scale_setting`), whether warm-up adapts that scale towards `target_accept`,
and which preconditioner it uses ("none" for a kernel that needs none, such as a model-specific Gibbs
sampler). `register_kernel` checks these facts and the defaults themselves, so `check_settings` assumes no
setting name beyond what the spec declares.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Optional

import blackjax
import jax
import jax.numpy as jnp
from blackjax.base import SamplingAlgorithm, build_sampling_algorithm

from ..core.validate import check_float, check_positive_float, check_positive_int

from . import mala as _mala
from . import rwmh as _rwmh
from . import slice as _slice

__all__ = ["KERNELS", "KernelSpec", "Tuning", "build", "check_settings", "density_evals", "initial_step_size",
           "initial_tuning", "register_kernel"]

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
    precond: "diagonal" (NUTS/HMC inverse mass), "cholesky" (a covariance factor) or "none".
    gradient_evals: `info -> number of gradient evaluations of the step` (its cost).
    reference_step_size: `D -> scale` that Metropolis adaptation restarts from (Roberts & Rosenthal 2001).
    check: optional `settings -> None` that raises ValueError for an impossible value of the kernel's own
      settings; it may read only names in `defaults` (`register_kernel` runs it on them).
    adapts_step_size: whether warm-up tunes the scale towards the `target_accept` setting, which such a
      kernel must have, checked in (0, 1) (False for slice sampling, whose interval search adapts at every
      move, and for kernels with no scale).
    density_evals: optional `info -> number of density evaluations of the step`; None means one per
      gradient evaluation plus one.
    scale_setting: the setting holding the scale warm-up starts from (a positive number, or None for
      `reference_step_size`); "width" for slice sampling; None for a kernel with no such setting.
    steps_per_draw: optional `D -> steps of the tuned kernel per independent draw`; a "cholesky" kernel's
      warm-up then pools each window's covariance with the current one, weighted as D draws
      (`adapters.metropolis_adapter`). None pools nothing.
    """

    build: Callable[[Callable, Tuning, dict], SamplingAlgorithm]
    defaults: dict
    precond: str
    gradient_evals: Callable[[Any], Array]
    reference_step_size: Optional[Callable[[int], float]] = None
    check: Optional[Callable[[dict], None]] = None
    adapts_step_size: bool = True
    density_evals: Optional[Callable[[Any], Array]] = None
    scale_setting: Optional[str] = "initial_step_size"
    steps_per_draw: Optional[Callable[[int], float]] = None


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
PRECONDITIONERS = ("diagonal", "cholesky", "none")


def register_kernel(name: str, spec: KernelSpec) -> KernelSpec:
    """Add a sampler; `cj.sample(method=name)` and every construction can then use it."""
    if not isinstance(spec, KernelSpec):
        raise ValueError(f"spec: expected a KernelSpec, got {type(spec).__name__}")
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty string, got {name!r}")
    if spec.precond not in PRECONDITIONERS:
        raise ValueError(f"spec.precond: expected one of {list(PRECONDITIONERS)}, got {spec.precond!r}")
    if not callable(spec.build) or not callable(spec.gradient_evals):
        raise ValueError("spec.build and spec.gradient_evals: must be callable")
    if not isinstance(spec.defaults, dict) or not all(isinstance(k, str) for k in spec.defaults):
        raise ValueError("spec.defaults: expected a dict of setting names to default values")
    if spec.adapts_step_size and "target_accept" not in spec.defaults:
        raise ValueError("spec.defaults: a kernel whose warm-up adapts its step size needs a "
                         "'target_accept' setting")
    if spec.precond == "cholesky" and spec.adapts_step_size and spec.reference_step_size is None:
        raise ValueError("spec.reference_step_size: a 'cholesky' kernel needs it (the scale that its warm-up "
                         "restarts from after each covariance estimate)")
    if spec.scale_setting is not None and spec.scale_setting not in spec.defaults:
        raise ValueError(f"spec.scale_setting: {spec.scale_setting!r} is not a setting in spec.defaults; name "
                         "the setting that holds the starting scale, or pass scale_setting=None")
    try:  # the defaults must pass the kernel's own checks, and `check` may read only declared settings
        _check_values(spec, dict(spec.defaults))
    except KeyError as err:
        raise ValueError(f"spec.check: reads the setting {err.args[0]!r}, which spec.defaults does not "
                         "declare") from None
    except ValueError as err:
        raise ValueError(f"spec.defaults: {err}") from None
    KERNELS[name] = spec
    return spec


def _check_values(spec: KernelSpec, settings: dict) -> dict:
    """The checks of a full settings dict that the spec declares: plain scalars, `target_accept` in (0, 1)
    for a kernel that adapts its scale, a positive (or None) `scale_setting`, and the spec's own `check`."""
    for name, value in settings.items():
        if isinstance(value, (list, dict, jax.Array)) or hasattr(value, "__array__"):
            raise ValueError(f"{name}: settings must be plain Python scalars, got {type(value).__name__}")
    if spec.adapts_step_size:
        check_float(settings["target_accept"], "target_accept", 0, 1, open_low=True, open_high=True)
    if spec.scale_setting is not None and settings[spec.scale_setting] is not None:
        check_positive_float(settings[spec.scale_setting], spec.scale_setting)
    if spec.check is not None:
        spec.check(settings)
    return settings


def _check_nuts(settings: dict) -> None:
    check_positive_int(settings["max_num_doublings"], "max_num_doublings")


def _check_hmc(settings: dict) -> None:
    check_positive_int(settings["num_integration_steps"], "num_integration_steps")
    check_float(settings["step_jitter"], "step_jitter", 0, 1, open_high=True)


def _check_slice(settings: dict) -> None:
    for name in ("passes", "max_expansions", "max_shrinkage"):
        check_positive_int(settings[name], name)
    check_positive_float(settings["width"], "width")
    if not isinstance(settings["precondition"], bool):
        raise ValueError(f"precondition: expected True or False, got {settings['precondition']!r}")


def _build_slice(logdensity_fn, tuning: Tuning, settings: dict) -> SamplingAlgorithm:
    # precondition=False: directions uniform on the unit sphere, as Chen & Campbell's hit-and-run sampler.
    chol = tuning.precond if settings["precondition"] else jnp.eye(tuning.precond.shape[-1],
                                                                   dtype=tuning.precond.dtype)
    return _slice.slice_sampler(logdensity_fn, tuning.step_size, chol, int(settings["passes"]),
                                int(settings["max_expansions"]), int(settings["max_shrinkage"]))


register_kernel("nuts", KernelSpec(
    _build_nuts, {"target_accept": 0.8, "max_num_doublings": 10, "initial_step_size": 1.0}, "diagonal",
    lambda info: jnp.asarray(info.num_integration_steps, jnp.int32), check=_check_nuts))
register_kernel("hmc", KernelSpec(
    _build_hmc, {"target_accept": 0.8, "num_integration_steps": 10, "initial_step_size": 1.0,
                 "step_jitter": 0.2}, "diagonal",
    lambda info: jnp.asarray(info.num_integration_steps, jnp.int32), check=_check_hmc))
register_kernel("mala", KernelSpec(
    lambda ld, t, s: _mala.mala(ld, t.step_size, t.precond), {"target_accept": 0.574, "initial_step_size": None},
    "cholesky", lambda info: jnp.asarray(1, jnp.int32), lambda d: 1.65 * d ** (-1.0 / 6.0)))
# The tuned random walk's efficiency is about 0.331 / D (Roberts & Rosenthal 2001): D / 0.331 steps per draw.
register_kernel("rwmh", KernelSpec(
    lambda ld, t, s: _rwmh.rwmh(ld, t.step_size, t.precond), {"target_accept": 0.234, "initial_step_size": None},
    "cholesky", lambda info: jnp.asarray(0, jnp.int32), lambda d: 2.38 / math.sqrt(d),
    steps_per_draw=lambda d: d / 0.331))
# Width 3 in units of the preconditioned direction: about the length of a slice through a standard normal
# at a typical level (Neal 2003, §4.2: a width near the slice's size costs the fewest evaluations).
# precondition=False gives unit directions in theta itself (Coreset MCMC's published sampler: width 10,
# 1,024 shrinks; `posterior_driven/coreset_mcmc.py` sets those).
register_kernel("slice", KernelSpec(
    _build_slice, {"width": 3.0, "passes": 3, "max_expansions": 20, "max_shrinkage": 100, "precondition": True},
    "cholesky",
    lambda info: jnp.asarray(0, jnp.int32), check=_check_slice, adapts_step_size=False,
    density_evals=lambda info: jnp.asarray(info.num_evaluations, jnp.int32), scale_setting="width"))


def check_settings(method: str, settings: dict) -> dict:
    """The method's settings with defaults filled in; ValueError for an unknown or impossible setting."""
    if method not in KERNELS:
        raise ValueError(f"method: unknown value {method!r}; expected one of {sorted(KERNELS)}")
    spec = KERNELS[method]
    out = dict(spec.defaults)
    for name, value in settings.items():
        if name not in out:
            raise ValueError(f"{name}: not a setting of method {method!r}; its settings are {list(out)}")
        out[name] = value
    return _check_values(spec, out)



def initial_step_size(method: str, settings: dict, dim: int) -> float:
    """The scale a kernel starts from: its `scale_setting` (`initial_step_size`; a slice kernel's `width`),
    else the spec's dimension-based reference, else 1."""
    spec = KERNELS[method]
    step = settings[spec.scale_setting] if spec.scale_setting is not None else None
    if step is None:
        step = spec.reference_step_size(dim) if spec.reference_step_size is not None else 1.0
    return float(step)


def initial_tuning(method: str, init_cov: Array, settings: dict) -> Tuning:
    """The tuning warm-up starts from: the diagonal of `init_cov` (NUTS/HMC) or its Cholesky factor (also
    for kernels with no preconditioner, which ignore it)."""
    spec = KERNELS[method]
    step = initial_step_size(method, settings, init_cov.shape[0])
    precond = jnp.diag(init_cov) if spec.precond == "diagonal" else jnp.linalg.cholesky(init_cov)
    return Tuning(jnp.asarray(step, init_cov.dtype), precond)


def density_evals(method: str, info) -> Array:
    """Density evaluations one step of `method` spent (its cost in likelihood evaluations per row)."""
    spec = KERNELS[method]
    if spec.density_evals is not None:
        return spec.density_evals(info)
    return spec.gradient_evals(info) + 1


def build(method: str, logdensity_fn: Callable, tuning: Tuning, settings: dict) -> SamplingAlgorithm:
    """The `SamplingAlgorithm` of `method` for this density and tuning (settings as from `check_settings`)."""
    return KERNELS[method].build(logdensity_fn, tuning, settings)
