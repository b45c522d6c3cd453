"""coresets_jax: Bayesian coresets in JAX.

The pipeline, in the order the data flows:
  model (`Model`, `models`) -> pi_hat (`laplace`, `prior`, `samples`) -> `project` (HC Algorithm 3)
  -> `build` (a sparse solver from `METHODS`) or `coreset` (all of it) -> `sample` (MCMC on the coreset)
  -> `metrics`.
Beyond one device: `shard`, `merged_coreset`, `stream_coreset`. For logistic regression, also
`sensitivity_coreset` (LR Algorithm 1).
"""

from . import data, distributed, inference, metrics, models, sensitivity, sharding, solvers, streaming
from .compress import compress
from .construct import METHODS, build, coreset, relative_error
from .data import load_npz
from .distributed import merged_coreset
from .inference import Posterior, sample
from .core.model import Model, log_joint, log_likelihoods
from .pihat import GaussianApproximation, laplace, prior, samples
from .projection import NORMS, project
from .sensitivity import sensitivity_coreset
from .sharding import shard
from .solvers import Coreset
from .solvers.refit import refit
from .streaming import stream_coreset
from .numpyro_bridge import from_numpyro
from .io import load, save
from .arviz_export import to_arviz

__version__ = "0.1.0"

__all__ = [
    "Coreset",
    "GaussianApproximation",
    "METHODS",
    "Model",
    "NORMS",
    "Posterior",
    "build",
    "from_numpyro",
    "load",
    "save",
    "to_arviz",
    "compress",
    "coreset",
    "data",
    "distributed",
    "inference",
    "laplace",
    "load_npz",
    "log_joint",
    "log_likelihoods",
    "merged_coreset",
    "metrics",
    "models",
    "prior",
    "project",
    "refit",
    "relative_error",
    "sample",
    "samples",
    "sensitivity",
    "sensitivity_coreset",
    "shard",
    "sharding",
    "solvers",
    "stream_coreset",
    "streaming",
]
