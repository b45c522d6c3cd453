"""Compatibility alias: input validation lives in `coresets_jax.core.validate`."""

from .core.validate import *  # noqa: F401,F403
from .core.validate import __all__  # noqa: F401
