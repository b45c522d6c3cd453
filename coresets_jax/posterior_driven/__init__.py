"""Posterior-driven constructions: they optimise the weights against samples of the coreset posterior pi_w
itself, so they need the model and a sampler, not projected vectors. Each is one file whose `make(model,
size, **options)` returns a pure `solve(key, data, data_weights, start)`, registered here.
"""

from ..registry import Construction, register
from .sparse_vi import sparse_vi

register(Construction("sparse_vi", sparse_vi, needs="posterior", random=True,
                      description="Sparse VI (Campbell & Beronov 2019): greedy selection + SGD on KL"),
         replace=True)

__all__ = ["sparse_vi"]
