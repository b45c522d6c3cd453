"""Sparse non-negative vector-sum solvers sharing one interface (see `base`).

`REGISTRY` maps a method name to a constructor `(size, **options) -> Solver`. Adding an algorithm is one
file with its constructor plus one line here.
"""

from .base import Coreset, Problem, Solver, Support, make_problem, run
from .frank_wolfe import frank_wolfe
from .giga import giga
from .iht import iht, iht2
from .omp import omp
from .importance import importance
from .uniform import uniform

REGISTRY = {
    "uniform": uniform,
    "importance": importance,
    "frank_wolfe": frank_wolfe,
    "giga": giga,
    "iht": iht,
    "iht2": iht2,
    "omp": omp,
}

# Methods whose draws are random and so need a key.
RANDOM_METHODS = {"uniform", "importance"}

__all__ = ["Coreset", "Problem", "REGISTRY", "RANDOM_METHODS", "Solver", "Support", "make_problem", "run",
           "frank_wolfe", "importance", "uniform",
           "giga", "iht", "iht2", "omp"]
