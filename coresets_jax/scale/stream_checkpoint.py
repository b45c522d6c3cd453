"""The state of a streamed merge-reduce tree (`stream_coreset`): its nodes, and a checkpoint of them on disk
that a killed run resumes from (written atomically; refused when the run's settings differ)."""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..interop.io import atomic_write

__all__ = ["Checkpoint", "Node", "load_checkpoint", "run_fingerprint", "save_checkpoint"]

Array = jax.Array


class Node(NamedTuple):
    """A weighted coreset in the tree: global row indices, weights, projected rows, data rows."""

    indices: Array
    weights: Array
    V: Array
    data: Any


class Checkpoint(NamedTuple):
    """What a resumed run needs: the tree (one node per level), the counters and the first leaf's structure."""

    levels: dict
    offset: int
    count: int
    max_held: int
    node_id: int


def run_fingerprint(size, method, norm, dtype, key, thetas, options) -> str:
    """Identifies the run a checkpoint belongs to: settings, key and the bytes of thetas."""
    digest = hashlib.sha256()
    for part in (size, method, norm, str(dtype), sorted(options.items())):
        digest.update(repr(part).encode())
    digest.update(np.asarray(jax.random.key_data(key)).tobytes())
    digest.update(np.ascontiguousarray(np.asarray(thetas)).tobytes())
    return digest.hexdigest()


def save_checkpoint(path: str, state: Checkpoint, fingerprint: str) -> None:
    """Write the merge-tree state atomically: a temporary file in the same folder, then `os.replace`."""
    arrays = {"fingerprint": np.asarray(fingerprint),
              "counters": np.asarray([state.offset, state.count, state.max_held, state.node_id], np.int64),
              "levels": np.asarray(sorted(state.levels), np.int64)}
    for level, node in state.levels.items():
        arrays[f"l{level}_indices"] = np.asarray(node.indices)
        arrays[f"l{level}_weights"] = np.asarray(node.weights)
        arrays[f"l{level}_V"] = np.asarray(node.V)
        for i, leaf in enumerate(jax.tree_util.tree_leaves(node.data)):
            arrays[f"l{level}_data{i}"] = np.asarray(leaf)
    atomic_write(path, lambda f: np.savez(f, **arrays))


def load_checkpoint(path: str, fingerprint: str, treedef) -> Checkpoint:
    try:
        with np.load(path, allow_pickle=False) as f:
            stored = {name: f[name] for name in f.files}
    except Exception as err:
        raise ValueError(f"checkpoint: cannot read {path!r} ({type(err).__name__}: {err}); delete it to "
                         f"start afresh") from err
    if str(stored.get("fingerprint")) != fingerprint:
        raise ValueError(f"checkpoint: {path!r} was written by a run with other settings (size, method, norm, "
                         f"dtype, key, thetas or options differ); delete it or pass another path")
    offset, count, max_held, node_id = (int(v) for v in stored["counters"])
    levels = {}
    for level in (int(v) for v in stored["levels"]):
        leaves = [jnp.asarray(stored[f"l{level}_data{i}"]) for i in range(treedef.num_leaves)]
        levels[level] = Node(jnp.asarray(stored[f"l{level}_indices"]), jnp.asarray(stored[f"l{level}_weights"]),
                              jnp.asarray(stored[f"l{level}_V"]), jax.tree_util.tree_unflatten(treedef, leaves))
    return Checkpoint(levels, offset, count, max_held, node_id)
