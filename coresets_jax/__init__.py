"""coresets_jax: Bayesian coresets in JAX.

model -> pi_hat (`laplace`, `prior`, `samples`) -> `project` -> `build` (sparse solver) -> inference.
"""

from . import data, metrics, models, solvers
from .construct import METHODS, build, coreset, relative_error
from . import inference
from .inference import Posterior, sample
from .data import load_npz
from .model import Model, log_joint, log_likelihoods
from .pihat import GaussianApproximation, laplace, prior, samples
from .projection import NORMS, project
from .solvers import Coreset

__version__ = "0.1.0"

__all__ = [
    "Coreset",
    "GaussianApproximation",
    "METHODS",
    "Model",
    "NORMS",
    "build",
    "coreset",
    "data",
    "laplace",
    "load_npz",
    "log_joint",
    "log_likelihoods",
    "metrics",
    "models",
    "prior",
    "project",
    "relative_error",
    "samples",
    "solvers",
    "inference",
    "Posterior",
    "sample",
]

# Beyond one device (issue 6): sharded construction, merged coresets, sensitivity coresets.
from . import distributed, sensitivity, sharding
from .distributed import merged_coreset
from .sensitivity import sensitivity_coreset
from .sharding import shard

__all__ += ["distributed", "merged_coreset", "sensitivity", "sensitivity_coreset", "shard", "sharding"]

# Weight refit on a fixed support (issue 3).
from .solvers.refit import refit

__all__ += ["refit"]

# Streaming merge-reduce (issue 6).
from . import streaming
from .streaming import stream_coreset

__all__ += ["stream_coreset", "streaming"]
