"""The core every stage imports: `Model` and the weighted log density, the row accessor, the mesh a sharded
input lives on and chunked sources (`rows`, `mesh`, `chunks`), `Coreset`, and input validation. Nothing here
imports another stage (pi_hat, projection, construction, inference, metrics), so the dependency arrows point
one way: stages -> core.
"""

from . import validate
from .coreset import Coreset
from .model import Model, initial_theta, log_joint, log_likelihoods, weighted_log_density, weighted_sum
from .rows import take_data, take_rows, top_k

__all__ = ["Coreset", "Model", "initial_theta", "log_joint", "log_likelihoods", "take_data", "take_rows",
           "top_k", "validate", "weighted_log_density", "weighted_sum"]
