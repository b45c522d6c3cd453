"""What a built-in model expects of its data (`DataSpec`) and the checks of it: the pytree structure (the tuple
(X, y), or one (N, D) array), the feature axis, and the label set (binary labels in {-1, +1} or {0, 1},
non-negative integer counts, or real responses). `core.checks.check_model_data` runs them once, at the public
boundary; the label checks cost one reduction over y (one device-to-host sync)."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import validate as _validate

__all__ = ["DataSpec", "LABELS", "check_labels", "check_matrix_data", "check_xy", "data_spec", "leaf_shapes", "register"]


LABELS = ("binary", "count", "real")


class DataSpec(NamedTuple):
    """The data a built-in model expects.

    kind: "xy" for the tuple (X, y), X of shape (N, D) and y of shape (N,); "matrix" for one (N, D) array.
    labels: for "xy", what y holds: "binary" ({-1, +1} or {0, 1}), "count" ({0, 1, 2, ...}) or "real".
    dim: a fixed D ("matrix" models: the Gaussian mean's dimension); None means D = X.shape[1].
    """

    kind: str
    labels: Optional[str] = None
    dim: Optional[int] = None


def register(model, spec: DataSpec):
    """`model` with its `data_spec` field set to `spec` (the built-in models call this once)."""
    if spec.kind not in ("xy", "matrix"):
        raise ValueError(f"spec: kind must be 'xy' or 'matrix', got {spec.kind!r}")
    if spec.kind == "xy" and spec.labels not in LABELS:
        raise ValueError(f"spec: labels must be one of {LABELS}, got {spec.labels!r}")
    return model._replace(data_spec=spec)


def data_spec(model) -> Optional[Any]:
    """The model's `data_spec` field (a `DataSpec`, or a callable check), or None."""
    return getattr(model, "data_spec", None)


def leaf_shapes(data: Any) -> list:
    """The shape of each leaf of a data pytree (for messages)."""
    return [tuple(np.shape(leaf)) for leaf in jax.tree_util.tree_leaves(data)]


def _describe(values: np.ndarray, limit: int = 6) -> str:
    shown = ", ".join(f"{v:g}" for v in values[:limit])
    return shown + (f", ... ({values.size} distinct)" if values.size > limit else "")


def _bad_values(y: Any, ok: jax.Array) -> str:
    """A few distinct offending values of y, for the message (only on the error path)."""
    try:
        bad = np.asarray(y)[~np.asarray(ok)]
        return _describe(np.unique(bad.astype(np.float64)))
    except Exception:  # a multi-process array is not addressable here: say less
        return "values outside the set"


@jax.jit
def _binary_flags(y):
    return jnp.all(jnp.abs(y) == 1), jnp.all((y == 0) | (y == 1))


def check_labels(y: Any, labels: str, model_name: str = "the model", name: str = "data") -> None:
    """Check the response vector y of an (X, y) model.

    "binary": every y in {-1, +1}, or every y in {0, 1} (0 means -1; NumPyro's and scikit-learn's coding).
    A mixture such as {-1, 0, 1} is refused: it is not a binary coding. "count": y in {0, 1, 2, ...}
    (integer or integral floating values). "real": finite values (checked with the rest of the data).
    """
    if labels == "real":
        return
    host = _validate.host_array(y)  # small y: NumPy on the host, no compilation
    if host is None:
        y = jnp.asarray(y)
    if labels == "binary":
        if host is not None:
            ok_pm, ok_01 = bool(np.all(np.abs(host) == 1)), bool(np.all((host == 0) | (host == 1)))
        else:
            ok_pm, ok_01 = (bool(v) for v in jax.device_get(_binary_flags(y)))
        if not (ok_pm or ok_01):
            raise ValueError(f"{name}: {model_name} needs labels y in {{-1, +1}} or in {{0, 1}} (0 means -1); "
                             f"found y = {_bad_values(y, jnp.zeros(y.shape, bool))}")
    elif labels == "count":
        if jnp.issubdtype(jnp.result_type(y), jnp.bool_):
            return
        xp, y = (np, host) if host is not None else (jnp, y)
        ok = (y >= 0) & (xp.floor(y) == y) if jnp.issubdtype(y.dtype, jnp.inexact) else y >= 0
        if not bool(xp.all(ok)):
            raise ValueError(f"{name}: {model_name} needs counts y in {{0, 1, 2, ...}}; found y = "
                             f"{_bad_values(y, ok)}")
    else:
        raise ValueError(f"labels: expected one of {LABELS}, got {labels!r}")


def check_xy(data: Any, spec: DataSpec, model_name: str, name: str) -> None:
    if isinstance(data, dict):
        raise ValueError(f"{name}: {model_name} expects the tuple (X, y), got a dict with keys "
                         f"{sorted(map(str, data))}; pass (X, y) in that order")
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        got = f"a {type(data).__name__} of length {len(data)}" if isinstance(data, (tuple, list)) else \
            f"{type(data).__name__}" + (f" of shape {np.shape(data)}" if hasattr(data, "shape") else "")
        raise ValueError(f"{name}: {model_name} expects the tuple (X, y) with X of shape (N, D) and y of "
                         f"shape (N,), got {got}")
    X, y = data
    for label, leaf in (("X", X), ("y", y)):
        if not hasattr(leaf, "shape"):
            raise ValueError(f"{name}: {label} must be an array, got {type(leaf).__name__}")
    xs, ys = tuple(np.shape(X)), tuple(np.shape(y))
    if len(xs) == 1:
        raise ValueError(f"{name}: X has shape {xs}, but {model_name} expects X of shape (N, D) with a feature "
                         f"axis (y has shape {ys}); for a single feature pass X[:, None], of shape "
                         f"({xs[0]}, 1)")
    if len(xs) != 2:
        raise ValueError(f"{name}: X has shape {xs}, but {model_name} expects X of shape (N, D)")
    if len(ys) != 1:
        hint = f"; pass y.reshape(-1), of shape ({int(np.prod(ys))},)" if len(ys) == 2 and 1 in ys else ""
        raise ValueError(f"{name}: y has shape {ys}, but {model_name} expects y of shape (N,) = ({xs[0]},) "
                         f"for X of shape {xs}{hint}")
    if xs[0] != ys[0]:
        raise ValueError(f"{name}: leading axes do not match: X has shape {xs} and y has shape {ys}")
    if xs[1] < 1:
        raise ValueError(f"{name}: X has shape {xs}: no features (D = 0)")
    if jnp.issubdtype(jnp.result_type(X), jnp.bool_) or not jnp.issubdtype(jnp.result_type(X), jnp.number):
        raise ValueError(f"{name}: X must be numeric, got dtype {jnp.result_type(X)}")


def check_matrix_data(data: Any, spec: DataSpec, model_name: str, name: str) -> None:
    expected = f"(N, {spec.dim})" if spec.dim is not None else "(N, D)"
    if isinstance(data, (dict, tuple, list)):
        raise ValueError(f"{name}: {model_name} expects one array of shape {expected}, got a "
                         f"{type(data).__name__} of leaves with shapes {leaf_shapes(data)}")
    if not hasattr(data, "shape"):
        raise ValueError(f"{name}: {model_name} expects an array of shape {expected}, got "
                         f"{type(data).__name__}")
    shape = tuple(np.shape(data))
    if len(shape) != 2:
        hint = f"; for one-dimensional observations pass y[:, None], of shape ({shape[0]}, 1)" \
            if len(shape) == 1 else ""
        raise ValueError(f"{name}: has shape {shape}, but {model_name} expects shape {expected}{hint}")
    if spec.dim is not None and shape[1] != spec.dim:
        raise ValueError(f"{name}: has shape {shape}, but {model_name} expects shape ({shape[0]}, {spec.dim}) "
                         f"(its dim is {spec.dim})")
