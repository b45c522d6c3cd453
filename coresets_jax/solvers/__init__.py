"""Sparse non-negative vector-sum solvers sharing one interface (see `base`), registered as constructions.

Adding an algorithm is one file with its constructor `(size, **options) -> Solver` plus one `register` line
here (or in the user's own code: `cj.register(cj.Construction(name, make))`).
"""

from ..registry import Construction, register
from .base import Problem, Solver, Support, make_problem, run
from .frank_wolfe import frank_wolfe
from .giga import giga
from .iht import iht, iht2
from .importance import importance
from .omp import omp
from .uniform import uniform

for _construction in (
    Construction("uniform", uniform, random=True, description="uniform subsampling, weights N/M per draw"),
    Construction("importance", importance, random=True, description="Hilbert importance sampling, HC Alg. 1"),
    Construction("frank_wolfe", frank_wolfe, description="Hilbert Frank-Wolfe, HC Alg. 2"),
    Construction("giga", giga, description="greedy iterative geodesic ascent (Campbell & Broderick 2018)"),
    Construction("iht", iht, description="accelerated IHT, IHT Alg. 2"),
    Construction("iht2", iht2, description="accelerated IHT II, IHT Alg. 3"),
    Construction("omp", omp, description="orthogonal pursuit with a non-negative least-squares refit"),
):
    register(_construction, replace=True)

__all__ = ["Problem", "Solver", "Support", "make_problem", "run",
           "frank_wolfe", "giga", "iht", "iht2", "importance", "omp", "uniform"]
