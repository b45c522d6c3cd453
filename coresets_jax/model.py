"""Compatibility alias: `Model` and the weighted log density live in `coresets_jax.core.model`."""

from .core.model import *  # noqa: F401,F403
from .core.model import __all__  # noqa: F401
