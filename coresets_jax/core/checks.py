"""Model-aware checks of data and parameters at the public boundary (issue 15).

`core.validate` checks what every stage needs whatever the model (a shared leading axis N, finite values).
This module checks what depends on the model:

- A built-in model declares the data it expects with a `DataSpec` (`register`; both, and the checks of the
  structure, feature axis and labels, live in `core/data_spec.py`). `check_model_data` checks it once.
- Any model, custom ones included, is probed once with `jax.eval_shape` (`check_model`): its
  log-likelihood must return one scalar per datum (a vector is refused, not summed), and it must accept a
  theta of the dimension D. Nothing is evaluated: the probe traces one abstract datum.
- `check_theta` checks an array of parameters (thetas, pi_hat samples, an `init`, posterior samples)
  against the model's D for the data, naming both shapes.

Every failure is a `ValueError` naming the argument. These run outside `jit`, on concrete arrays; the label
checks cost one reduction over y (one device-to-host sync).
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from . import validate as _validate
from .data_spec import (LABELS, DataSpec, check_labels, check_matrix_data, check_xy, data_spec,  # noqa: F401
                        leaf_shapes, register)

__all__ = ["DataSpec", "LABELS", "check_labels", "check_model", "check_model_data", "check_theta",
           "data_spec", "model_dim", "register"]

def _name(model) -> str:
    return getattr(model, "name", "custom")


def _check_model_type(model) -> None:
    if not callable(getattr(model, "log_likelihood", None)) or not callable(getattr(model, "log_prior", None)):
        raise ValueError(f"model: expected a cj.Model with log_likelihood and log_prior, got "
                         f"{type(model).__name__}")


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
                             f"({known},) for data with leaf shapes {leaf_shapes(data)}")
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
                         f"datum of leaf shapes {shapes} (data leaf shapes {leaf_shapes(data)}): "
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
        (check_xy if spec.kind == "xy" else check_matrix_data)(data, spec, _name(model), name)
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
                         f"data with leaf shapes {leaf_shapes(data)}")
    try:
        check_model(model, data, theta_dim=d)
    except ValueError as err:
        msg = str(err)
        raise ValueError(f"{name}: {msg.split(': ', 1)[1]}" if msg.startswith("theta: ") else msg) from err
    return d
