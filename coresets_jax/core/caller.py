"""The caller's line for a warning: the first frame outside the package.

A fixed `stacklevel` names the right line only for one call depth; the public functions are wrapped
(`compilation.full_precision`) and call each other (`cj.coreset` certifies, `cj.refine` samples), so the
depth varies. `stacklevel()` counts the frames up to the first one outside coresets_jax instead.
"""

from __future__ import annotations

import os
import sys

__all__ = ["stacklevel"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def stacklevel() -> int:
    """`warnings.warn(..., stacklevel=stacklevel())` from inside the package names the first frame outside
    it: the user's line, however many of the package's frames lie between."""
    frame, level = sys._getframe(1), 1  # level 1: the function that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
