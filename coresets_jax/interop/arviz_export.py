"""ArviZ out: `to_arviz(post) -> arviz.InferenceData` for a `cj.sample` result.

The draws are `post.samples`, (chains, draws, D), over the flat unconstrained theta. When the model came from
`cj.from_numpyro` (it has `constrain`), each draw is mapped to NumPyro's named, constrained site values
(`vmap` of `model.constrain` over all draws), so `az.summary` reads `beta`, `sigma` and so on. Otherwise the
draws are one variable, `theta`, with a `theta_dim_0` coordinate of length D.

ArviZ is a base dependency (for `to_arviz` and `Certificate.to_arviz`; `cj.certify` has its own PSIS,
`certification.psis`); it is imported only where it is used, since importing it takes about a second.
"""

from __future__ import annotations

from typing import Any, Optional

import warnings

import jax
import numpy as np

__all__ = ["load_arviz", "to_arviz"]


def load_arviz():
    """The arviz module. Its first import warns (FutureWarning) about a coming refactor: that notice is
    ArviZ's to its own users, not something a coresets_jax user can act on, so it is not passed on."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"(?s).*ArviZ is undergoing a major refactor",
                                    category=FutureWarning)
            import arviz as az
    except ImportError as err:
        raise ImportError("this needs arviz, a base dependency of coresets_jax: pip install arviz") from err
    return az


def constrained_draws(model: Any, samples: Any) -> dict:
    """{site: (chains, draws, *site_shape)}: `model.constrain` applied to every draw of (C, S, D)."""
    samples = jax.numpy.asarray(samples)
    chains, draws, dim = samples.shape
    flat = samples.reshape(chains * draws, dim)
    values = jax.jit(jax.vmap(model.constrain))(flat)
    return {name: np.asarray(v).reshape((chains, draws) + tuple(np.shape(v)[1:]))
            for name, v in values.items()}


def to_arviz(post: Any, model: Optional[Any] = None, var_name: str = "theta"):
    """An `arviz.InferenceData` with posterior draws and sampler statistics.

    Args:
      post: a `Posterior` from `cj.sample` (reads `samples` (C, S, D), `stats.draw_acceptance` (C, S),
        `stats.draw_divergent` (C, S), `stats.step_size` (C,), `method`, `num_warmup`, and `model`).
      model: the `cj.Model` sampled, when `post` does not carry it. With `model.constrain` set (NumPyro
        models), the posterior group holds NumPyro's site names and constrained values.
      var_name: the variable name of the flat theta when the model has no `constrain`.

    Returns:
      InferenceData with groups `posterior` and `sample_stats` (`acceptance_rate`, `diverging`,
      `step_size`), and attributes `method`, `num_warmup`, `inference_library`.
    """
    az = load_arviz()
    model = model if model is not None else getattr(post, "model", None)
    samples = np.asarray(post.samples)
    if samples.ndim != 3:
        raise ValueError(f"post.samples: expected shape (chains, draws, D), got {samples.shape}")
    chains, draws, _ = samples.shape
    if model is not None and getattr(model, "constrain", None) is not None:
        posterior = constrained_draws(model, samples)
    else:
        posterior = {var_name: samples}
    stats = post.stats
    sample_stats = {
        "acceptance_rate": np.asarray(stats.draw_acceptance),
        "diverging": np.asarray(stats.draw_divergent, dtype=bool),
        "step_size": np.broadcast_to(np.asarray(stats.step_size)[:, None], (chains, draws)).copy(),
    }
    attrs = {"method": str(getattr(post, "method", "")), "num_warmup": int(getattr(post, "num_warmup", 0)),
             "inference_library": "coresets_jax (blackjax)"}
    if model is not None:
        attrs["model"] = str(getattr(model, "name", ""))
    return az.from_dict(posterior=posterior, sample_stats=sample_stats, attrs=attrs)
