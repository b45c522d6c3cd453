"""Model-aware checks of data and parameters at the public boundary (issue 15).

`core.validate` checks what every stage needs whatever the model (a shared leading axis N, finite values).
This module checks what depends on the model:

- A built-in model declares the data it expects with a `DataSpec` (`register`): the pytree structure (the
  tuple (X, y), or one (N, D) array), the feature axis, the label set (binary labels in {-1, +1} or {0, 1},
  non-negative integer counts, or real responses) and the dimension D. `check_model_data` checks it once.
- Any model, custom ones included, is probed once with `jax.eval_shape` (`check_model`): its
  log-likelihood must return one scalar per datum (a vector is refused, not summed), and it must accept a
  theta of the dimension D. Nothing is evaluated: the probe traces one abstract datum.
- `check_theta` checks an array of parameters (thetas, pi_hat samples, an `init`, posterior samples)
  against the model's D for the data, naming both shapes.

Every failure is a `ValueError` naming the argument. These run outside `jit`, on concrete arrays; the label
checks cost one reduction over y (one device-to-host sync).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import validate as _validate

__all__ = ["DataSpec", "LABELS", "check_labels", "check_model", "check_model_data", "check_theta",
           "data_spec", "model_dim", "register"]

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


def _name(model) -> str:
    return getattr(model, "name", "custom")


def _check_model_type(model) -> None:
    if not callable(getattr(model, "log_likelihood", None)) or not callable(getattr(model, "log_prior", None)):
        raise ValueError(f"model: expected a cj.Model with log_likelihood and log_prior, got "
                         f"{type(model).__name__}")


def _shape_list(data: Any) -> list:
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


def _check_xy(data: Any, spec: DataSpec, model_name: str, name: str) -> None:
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


def _check_matrix(data: Any, spec: DataSpec, model_name: str, name: str) -> None:
    expected = f"(N, {spec.dim})" if spec.dim is not None else "(N, D)"
    if isinstance(data, (dict, tuple, list)):
        raise ValueError(f"{name}: {model_name} expects one array of shape {expected}, got a "
                         f"{type(data).__name__} of leaves with shapes {_shape_list(data)}")
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


def model_dim(model, data: Any) -> Optional[int]:
    """The dimension D the model expects for `data`, when it can be known without running the model.

    From the built-in spec (X.shape[1], or the fixed dim), else `model.dim`, else the shape of
    `model.init_params(data)` (abstractly, with `jax.eval_shape`); None when none of these is available.
    """
    spec = data_spec(model)
    if isinstance(spec, DataSpec):
        if spec.dim is not None:
            return int(spec.dim)
        if spec.kind == "xy" and isinstance(data, (tuple, list)) and len(data) == 2 and np.ndim(data[0]) == 2:
            return int(np.shape(data[0])[1])
    if getattr(model, "dim", None) is not None:
        return int(model.dim)
    init = getattr(model, "init_params", None)
    if init is not None:
        try:
            out = jax.eval_shape(init, _abstract(data, batch=True))
        except Exception:
            return None
        shape = getattr(out, "shape", None)
        if shape is not None and len(shape) == 1:
            return int(shape[0])
    return None


def _abstract(data: Any, batch: bool = False) -> Any:
    """ShapeDtypeStructs of the whole data (batch=True) or of one datum (its leading axis dropped)."""
    def one(leaf):
        shape = tuple(np.shape(leaf))
        return jax.ShapeDtypeStruct(shape if batch else shape[1:], jnp.result_type(leaf))

    return jax.tree_util.tree_map(one, data)


def _theta_dtype(data: Any):
    leaves = jax.tree_util.tree_leaves(data)
    dtype = jnp.promote_types(jnp.result_type(leaves[0]), jnp.float32) if leaves else jnp.float32
    return dtype if jnp.issubdtype(dtype, jnp.floating) else jnp.float32


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def check_model(model, data: Any, theta_dim: Optional[int] = None) -> int:
    """Probe a model once on one abstract datum with `jax.eval_shape` (nothing is computed). Returns D.

    Checks that `log_likelihood(theta, datum)` returns a scalar (a vector return is refused, not summed), that
    it accepts theta of dimension D, and that `log_prior(theta)` is a scalar and `grad_log_likelihood` (when
    given) returns shape (D,). D is `theta_dim` when given, checked against the model's own D when that is
    known (`model_dim`); a mismatch is a `ValueError` naming both shapes.
    """
    _check_model_type(model)
    known = model_dim(model, data)
    if theta_dim is not None:
        theta_dim = int(theta_dim)
        if known is not None and theta_dim != known:
            raise ValueError(f"theta: has shape ({theta_dim},) but {_name(model)} expects theta of shape "
                             f"({known},) for data with leaf shapes {_shape_list(data)}")
    dim = theta_dim if theta_dim is not None else known
    if dim is None:
        raise ValueError("model: its dimension D is unknown; give cj.Model(..., dim=D) or init_params, or "
                         "pass a theta")
    datum = _abstract(data)
    theta = jax.ShapeDtypeStruct((dim,), _theta_dtype(data))
    shapes = [s.shape for s in jax.tree_util.tree_leaves(datum)]
    try:
        out = jax.eval_shape(model.log_likelihood, theta, datum)
    except Exception as err:
        raise ValueError(f"theta: the model's log_likelihood cannot take theta of shape ({dim},) with one "
                         f"datum of leaf shapes {shapes} (data leaf shapes {_shape_list(data)}): "
                         f"{_first_line(err)}") from err
    leaves = jax.tree_util.tree_leaves(out)
    if len(leaves) != 1 or leaves[0].shape != ():
        got = [leaf.shape for leaf in leaves]
        raise ValueError(f"model: log_likelihood must return one scalar per datum; for theta of shape ({dim},) "
                         f"and one datum of leaf shapes {shapes} it returned shape(s) {got}. It is not summed "
                         f"for you: return the datum's log-likelihood, or make each datum one row")
    if not jnp.issubdtype(leaves[0].dtype, jnp.floating):
        raise ValueError(f"model: log_likelihood must return a floating scalar, got dtype {leaves[0].dtype}")
    try:
        prior = jax.eval_shape(model.log_prior, theta)
    except Exception as err:
        raise ValueError(f"theta: the model's log_prior cannot take theta of shape ({dim},): "
                         f"{_first_line(err)}") from err
    if getattr(prior, "shape", None) != ():
        raise ValueError(f"model: log_prior must return a scalar; for theta of shape ({dim},) it returned "
                         f"{getattr(prior, 'shape', type(prior).__name__)}")
    grad_fn = getattr(model, "grad_log_likelihood", None)
    if grad_fn is not None:
        try:
            g = jax.eval_shape(grad_fn, theta, datum)
        except Exception as err:
            raise ValueError(f"model: grad_log_likelihood cannot take theta of shape ({dim},): "
                             f"{_first_line(err)}") from err
        if getattr(g, "shape", None) != (dim,):
            raise ValueError(f"model: grad_log_likelihood must return shape ({dim},), got "
                             f"{getattr(g, 'shape', type(g).__name__)}")
    return dim


def check_model_data(model, data: Any, name: str = "data") -> int:
    """Check `data` against what `model` expects, once, at the public boundary. Returns N.

    Built-in models: structure (the tuple (X, y) or one (N, D) array; a dict is refused with a clear
    message), the feature axis (X of shape (N,) is refused), the label set, the count type. Every model: a
    shared leading axis and finite values (`core.validate.check_data`), then, when its D is known
    (`model_dim`), the `check_model` probe (a scalar log-likelihood, theta of dimension D).
    """
    _check_model_type(model)
    spec = data_spec(model)
    if callable(spec):
        spec(data, _name(model), name)
        spec = None
    if spec is not None:
        (_check_xy if spec.kind == "xy" else _check_matrix)(data, spec, _name(model), name)
    n = _validate.check_data(data, name)
    if spec is not None and spec.kind == "xy":
        check_labels(data[1], spec.labels, _name(model), name)
    if model_dim(model, data) is not None:
        check_model(model, data)
    return n


def check_theta(model, data: Any, theta: Any, name: str = "thetas", *, ndim: Optional[int] = None) -> int:
    """Check parameters against the model's D for `data`; returns D.

    `theta` is one theta (D,) or a batch (..., D) (thetas, pi_hat samples, chains of posterior samples); its
    last axis must be D. `ndim`, when given, is the number of axes required. A mismatch names both shapes.
    """
    shape = tuple(np.shape(theta))
    if len(shape) == 0 or (ndim is not None and len(shape) != ndim):
        want = {1: "(D,)", 2: "(S, D)", 3: "(chains, S, D)"}.get(ndim, "(..., D)")
        raise ValueError(f"{name}: expected shape {want}, got {shape}")
    d = shape[-1]
    known = model_dim(model, data)
    if known is not None and d != known:
        raise ValueError(f"{name}: has shape {shape}, so D = {d}, but {_name(model)} expects D = {known} for "
                         f"data with leaf shapes {_shape_list(data)}")
    try:
        check_model(model, data, theta_dim=d)
    except ValueError as err:
        msg = str(err)
        raise ValueError(f"{name}: {msg.split(': ', 1)[1]}" if msg.startswith("theta: ") else msg) from err
    return d
