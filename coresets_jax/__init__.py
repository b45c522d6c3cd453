"""coresets_jax: Bayesian coresets in JAX.

The pipeline, in the order the data flows:
  model (`Model`, `models`) -> pi_hat (`laplace`, `prior`, `samples`) -> `project` (HC Algorithm 3)
  -> `build` (a sparse solver from `METHODS`) or `coreset` (all of it) -> `sample` (MCMC on the coreset)
  -> `metrics`.
Beyond one device: `shard`, `merged_coreset`, `stream_coreset`. Compiled programs are kept on disk between
processes (`compilation_cache`). For logistic regression, also
`sensitivity_coreset` (LR Algorithm 1).

Each stage is a subpackage over `core` (docs/extending.md, "The layout"): `weighting` (pi_hat), `features`
(projection, compression), `solvers`, `sensitivity`, `posterior_driven`, `construct`, `inference`,
`certification`, `scale` (sharding, merged and streamed coresets), `interop` (NumPyro, ArviZ, files), `cli`.
"""

from . import compilation
from . import core, data
from .scale import distributed  # first, as before the layout: the constructions register in their listed order
from . import registry, inference, metrics, models, progress, sensitivity, solvers
from .scale import sharding, streaming
from .interop import io
from . import _deprecated
from .compilation import compilation_cache
from .features.compress import compress
from .construct import METHODS, POSTERIOR_METHODS, build, build_fn, coreset, coreset_fn, relative_error
from .registry import Construction, Start, methods, register
from .data import load_npz
from .scale.distributed import merged_coreset
from .inference import KernelSpec, Posterior, register_kernel, sample, sample_fn
from .core import Coreset, Model, log_joint, log_likelihoods, weighted_log_density
from .weighting.pihat import GaussianApproximation, laplace, laplace_fn, prior, samples
from .features.projection import NORMS, project, project_fn
from .sensitivity import sensitivity_coreset
from .scale.sharding import shard
from .solvers.refit import refit
from .scale.streaming import stream_coreset
from .interop.numpyro_bridge import from_numpyro
from .interop.io import load, save
from .interop.arviz_export import to_arviz
from .certification import Certificate, certify
from .posterior_driven.refine import refine

__version__ = "0.1.0"

# JAX's persistent compilation cache in the user's cache folder, unless opted out (CORESETS_JAX_NO_CACHE=1)
# or configured by the user already (`compilation` module docstring).
compilation._enable_default()

__all__ = [
    "Certificate",
    "Construction",
    "Coreset",
    "GaussianApproximation",
    "KernelSpec",
    "METHODS",
    "Model",
    "NORMS",
    "POSTERIOR_METHODS",
    "Posterior",
    "Start",
    "build",
    "build_fn",
    "certify",
    "compilation",
    "compilation_cache",
    "from_numpyro",
    "load",
    "save",
    "to_arviz",
    "compress",
    "core",
    "coreset",
    "coreset_fn",
    "data",
    "distributed",
    "inference",
    "laplace",
    "laplace_fn",
    "load_npz",
    "log_joint",
    "log_likelihoods",
    "merged_coreset",
    "methods",
    "metrics",
    "models",
    "prior",
    "project",
    "project_fn",
    "refine",
    "refit",
    "register",
    "register_kernel",
    "relative_error",
    "sample",
    "sample_fn",
    "samples",
    "sensitivity",
    "sensitivity_coreset",
    "shard",
    "sharding",
    "solvers",
    "stream_coreset",
    "streaming",
    "weighted_log_density",
]

# Submodules documented as `cj.<name>` beyond those in `__all__` (docs/reference): `dir(cj)` lists exactly
# `__all__`, these and `__version__`, not the implementation modules that importing the package binds as
# attributes (`cj.construct`, `cj.weighting`, ...), which stay importable by their full names.
_SUBMODULES = ("io", "progress", "registry")


def __dir__():
    return sorted({*__all__, *_SUBMODULES, "__version__"})


def __getattr__(name: str):
    # The old paths of moved modules (`cj.pihat`): the module, with a DeprecationWarning (`_deprecated.py`).
    return _deprecated.attribute(name)


# `coresets_jax.sharding` and the other documented old paths as aliases; the deprecated ones through a finder.
_deprecated.install()
