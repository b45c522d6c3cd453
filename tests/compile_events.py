"""Shared by the tests that count XLA compilations: `recorded_compilations`."""

import contextlib

from jax import monitoring


@contextlib.contextmanager
def recorded_compilations():
    """A list that collects the name of every XLA compilation run inside the block (from any thread), as it
    happens; the listener is removed on leaving the block."""
    names: list = []

    def listener(name, secs, **kw):
        if name.endswith("backend_compile_duration"):
            names.append(name)

    monitoring.register_event_duration_secs_listener(listener)
    try:
        yield names
    finally:
        monitoring.unregister_event_duration_listener(listener)
