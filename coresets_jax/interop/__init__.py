"""Other libraries and files: NumPyro models in, ArviZ out, coresets saved to disk.

- `numpyro_bridge`: `from_numpyro`, a NumPyro model as a `cj.Model` (per-datum likelihood and prior, HC §2
  Eq. 2.1) on the flat unconstrained theta;
- `arviz_export`: `to_arviz`, a `cj.sample` result as `arviz.InferenceData` with NumPyro's site names;
- `io`: `save` and `load` (atomic `.npz` files, with a fingerprint of the data), `read_metadata`.
"""

from .arviz_export import to_arviz
from .io import load, read_metadata, save
from .numpyro_bridge import from_numpyro

__all__ = ["from_numpyro", "load", "read_metadata", "save", "to_arviz"]
