"""Stage 2, features: the N log-likelihoods as vectors in R^J that the vector solvers approximate.

- `projection`: the random projection of HC Algorithm 3, "fisher" (HC Eq. 5.7) and "l2" (HC Eq. 5.10) norms,
  and IHT §2's centred features (`project`, and its pure core `project_fn`);
- `compress`: V ~= A B^T with B orthonormal, so that solvers run on the smaller A (length-squared row
  sampling, Frieze, Kannan & Vempala 2004): the function `cj.compress`, and `build`'s `compress="auto"`.
"""

from . import compress  # the module here (`cj.compress` is its function `compress.compress`)
from .projection import NORMS, auto_num_features, project, project_fn

__all__ = ["NORMS", "auto_num_features", "compress", "project", "project_fn"]
