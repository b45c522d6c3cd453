"""Progress lines of the command line on stderr (the table goes to stdout), silenced by --quiet."""

from __future__ import annotations

import sys

__all__ = ["log", "quiet"]

_state = {"quiet": False}


def quiet(on: bool) -> None:
    """Silence (True) or restore (False) `log`."""
    _state["quiet"] = bool(on)


def log(msg: str) -> None:
    """One progress line on stderr, unless quiet."""
    if not _state["quiet"]:
        print(msg, file=sys.stderr, flush=True)
