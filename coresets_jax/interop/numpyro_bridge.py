"""NumPyro models in: `from_numpyro(model_fn, *args, **kwargs) -> (Model, data)`.

A coreset needs the per-datum log-likelihood L_n(theta) and the log prior (HC §2, Eq. 2.1). A NumPyro model
states both at once; here they are separated with NumPyro's effect handlers:

- the observed sample sites inside the one `numpyro.plate` of size N are the likelihood; the model is called
  on a single row of the data (the plate then has size 1) and their log-densities are summed, so
  `log_likelihood(theta, datum)` is L_n(theta);
- every other sample site is the prior: the latent sites, and observed sites or `numpyro.factor`s outside
  the plate. The model is called on one fixed row (the data only shapes the plate).

theta is the flat vector of all latent sites in unconstrained space (`jax.flatten_util.ravel_pytree`). Each
latent site is mapped to its support by NumPyro's own `biject_to(site.fn.support)`, evaluated inside the trace
(so a support that depends on another latent also works), and log|det J| of that map is added to the prior:
the posterior over the unconstrained theta is then pi(theta) = p(T(theta)) |det J_T(theta)|, while L_n stays
the plain per-datum likelihood, as coreset weights must multiply it alone.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..core.model import Model
from ..core.validate import gather

__all__ = ["from_numpyro"]

INIT_SCALE = 1e-3  # size of the Laplace fit's starting point (init_params), off NumPyro's kinks at 0
_GOLDEN = 0.6180339887498949

Array = jax.Array


def _numpyro():
    try:
        import numpyro
        from numpyro import handlers
        from numpyro.distributions.transforms import biject_to
    except ImportError as err:  # pragma: no cover - numpyro is a declared dependency
        raise ImportError("from_numpyro needs numpyro: pip install numpyro") from err
    return numpyro, handlers, biject_to


def _bind(model_fn: Callable, args: tuple, kwargs: dict) -> inspect.BoundArguments:
    try:
        bound = inspect.signature(model_fn).bind(*args, **kwargs)
    except TypeError as err:
        raise ValueError(f"model_fn: the arguments do not fit its signature: {err}") from None
    return bound


def _leading(leaf) -> int | None:
    shape = np.shape(leaf)
    return shape[0] if len(shape) >= 1 else None


def _carries_axis(value: Any, n: int) -> bool:
    """True when `value` is a pytree of arrays that all have leading axis N."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return False
    leaves = jax.tree_util.tree_leaves(value)
    return bool(leaves) and all(hasattr(leaf, "shape") and _leading(leaf) == n for leaf in leaves)


def _first_row(a: Any) -> Any:
    """a[:1]. A jax.Array goes through `validate.gather`, which reads a CPU array's row through its NumPy view:
    `a[:1]` would compile a program for the slice on a first call, 20 ms per array of every cold
    `from_numpyro`."""
    return gather(a, np.zeros(1, np.intp)) if isinstance(a, jax.Array) else a[:1]


def _trace(model_fn, bound_args, bound_kwargs, substitute_fn=None, seed=None):
    _, handlers, _ = _numpyro()
    fn = model_fn
    if substitute_fn is not None:
        fn = handlers.substitute(fn, substitute_fn=substitute_fn)
    if seed is not None:
        fn = handlers.seed(fn, rng_seed=seed)
    return handlers.trace(fn).get_trace(*bound_args, **bound_kwargs)


class _Probe(NamedTuple):
    sites: dict          # name -> site metadata (type, is_observed, cond_indep_stack, args)
    unconstrained: dict  # latent name -> ShapeDtypeStruct of its unconstrained value


def _probe(model_fn, call_args, call_kwargs) -> _Probe:
    """Site metadata and unconstrained shapes of one seeded call, traced abstractly by `jax.eval_shape`."""
    _, _, biject_to = _numpyro()
    sites = {}

    def run():
        trace = _trace(model_fn, call_args, call_kwargs, seed=0)
        for name, s in trace.items():
            sites[name] = {"type": s["type"], "is_observed": s.get("is_observed", False),
                           "cond_indep_stack": tuple(s.get("cond_indep_stack", ())),
                           "args": s["args"] if s["type"] == "plate" else None}
        return {name: biject_to(s["fn"].support).inv(s["value"]) for name, s in trace.items()
                if s["type"] == "sample" and not s["is_observed"]}

    try:
        shapes = jax.eval_shape(run)
    except Exception as err:  # the user's model failed: say so in one line
        raise ValueError(f"model_fn: calling the model failed: {type(err).__name__}: {err}") from err
    return _Probe(sites, shapes)


def _find_plate(trace) -> tuple[str, int]:
    """The one plate that holds every observed site: (name, size)."""
    observed = [s for s in trace.values() if s["type"] == "sample" and s["is_observed"]
                and s["cond_indep_stack"]]
    plates = {}
    for site in observed:
        for frame in site["cond_indep_stack"]:
            plates.setdefault(frame.name, frame.size)
    common = [name for name in plates
              if all(any(f.name == name for f in s["cond_indep_stack"]) for s in observed)]
    if not observed or not common:
        raise ValueError("model_fn: expected the observed sites inside one numpyro.plate over the N data "
                         "rows, e.g. `with numpyro.plate('data', X.shape[0]): numpyro.sample('y', ..., "
                         "obs=y)`; found no plate holding every observed site")
    # The outermost common plate (the first one entered) is the plate over the data rows.
    name = common[0]
    plate_site = trace.get(name)
    if plate_site is not None and plate_site["args"] and plate_site["args"][1] is not None \
            and plate_site["args"][1] != plate_site["args"][0]:
        raise ValueError(f"model_fn: plate {name!r} subsamples; pass the full data (no subsample_size)")
    return name, int(plates[name])


def from_numpyro(model_fn: Callable, *args, **kwargs) -> tuple[Model, Any]:
    """A `cj.Model` and its data pytree from a NumPyro model and the arguments it is called with.

    The observed sites must sit inside one `numpyro.plate` over the N data rows. Every argument (positional
    or keyword) whose arrays all have leading axis N is data: the returned `data` is a dict from argument
    names to those arrays, and one datum is one row of each. Other arguments are fixed. An integer argument
    equal to N (a plate size passed by hand) is replaced by 1 when the model is called on one row.

    The returned model has `log_likelihood(theta, datum)` (HC Eq. 2.1's L_n), `log_prior(theta)` (the
    NumPyro prior in unconstrained space, log-det Jacobians included), `dim`, `init_params` (0 in
    unconstrained space, NumPyro's `init_to_feasible`),
    `sample_prior` (so `pi_hat="prior"` works) and `constrain(theta) -> {site: constrained value}`.

    Example:
      def logreg(X, y=None):
          beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
          with numpyro.plate("data", X.shape[0]):
              numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

      model, data = cj.from_numpyro(logreg, X, y=y)     # data == {"X": X, "y": y}
      cs = cj.coreset(model, data, size=100, key=key)
    """
    _, _, biject_to = _numpyro()
    if not callable(model_fn):
        raise ValueError(f"model_fn: expected a NumPyro model function, got {type(model_fn).__name__}")
    bound = _bind(model_fn, args, kwargs)
    sig = inspect.signature(model_fn)
    # Probe the model abstractly (jax.eval_shape: no compilation, no eager op dispatch): the plate first,
    # then the sites of a one-row call.
    full = _probe(model_fn, bound.args, bound.kwargs)
    plate_name, n = _find_plate(full.sites)

    data = {name: value for name, value in bound.arguments.items() if _carries_axis(value, n)}
    if not data:
        raise ValueError(f"model_fn: no argument has leading axis N = {n} (the size of plate "
                         f"{plate_name!r}), so there is no data to build a coreset of")
    data = jax.tree_util.tree_map(jnp.asarray, data)
    fixed = {name: value for name, value in bound.arguments.items() if name not in data}
    variadic = {p.name for p in sig.parameters.values()
                if p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL)}
    if variadic & set(data):
        raise ValueError("model_fn: data passed through *args or **kwargs is not supported; name the data "
                         "arguments in the model's signature")

    def call_args(rows: dict):
        """Positional and keyword arguments of model_fn for a call on `rows` (one row: plate size 1)."""
        values = {k: (1 if isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v == n else v)
                  for k, v in fixed.items()}
        values.update(rows)
        call = inspect.BoundArguments(sig, {k: values[k] for k in bound.arguments})
        return call.args, call.kwargs

    one_row = jax.tree_util.tree_map(_first_row, data)
    proto_args, proto_kwargs = call_args(one_row)
    proto = _probe(model_fn, proto_args, proto_kwargs)

    def in_plate(site) -> bool:
        return any(frame.name == plate_name for frame in site["cond_indep_stack"])

    latent = [name for name, s in proto.sites.items() if s["type"] == "sample" and not s["is_observed"]]
    local = [name for name in latent if in_plate(proto.sites[name])]
    if local:
        raise ValueError(f"model_fn: latent site(s) {local} sit inside the data plate {plate_name!r}; a "
                         "coreset needs every latent variable global (marginalise local latents out)")
    if not latent:
        raise ValueError("model_fn: the model has no latent sample sites, so there is no posterior")
    plate_sizes = {f.size for s in proto.sites.values() if s["type"] == "sample" and s["is_observed"]
                   for f in s["cond_indep_stack"] if f.name == plate_name}
    if plate_sizes != {1}:
        raise ValueError(f"model_fn: called on one data row, plate {plate_name!r} still has size "
                         f"{sorted(plate_sizes)}; take its size from the data, e.g. "
                         f"numpyro.plate({plate_name!r}, X.shape[0])")

    def unconstrained_value(site):
        return biject_to(site["fn"].support).inv(site["value"])

    unravels: list = []  # ravel_pytree's unravel holds sizes, shapes and dtypes only, no traced values

    def flatten(params: dict) -> Array:
        flat, unravel_fn = ravel_pytree(params)
        unravels.append(unravel_fn)
        return flat

    flat0 = jax.eval_shape(flatten, dict(proto.unconstrained))  # shapes alone: no eager program to compile
    unravel = unravels[0]
    dim = int(flat0.shape[0])
    dtype = jnp.promote_types(flat0.dtype, jnp.float32)

    def constrained_trace(theta: Array, rows: dict, log_dets: list):
        params = unravel(theta)

        def to_support(site):
            if site["type"] != "sample" or site["is_observed"] or site["name"] not in params:
                return None
            u = params[site["name"]]
            transform = biject_to(site["fn"].support)
            value = transform(u)
            log_det = jnp.sum(transform.log_abs_det_jacobian(u, value))
            log_dets.append(log_det if site["scale"] is None else site["scale"] * log_det)
            return value

        call_a, call_kw = call_args(rows)
        return _trace(model_fn, call_a, call_kw, substitute_fn=to_support)

    def site_log_prob(site) -> Array:
        lp = jnp.sum(site["fn"].log_prob(site["value"]))
        return lp if site["scale"] is None else site["scale"] * lp

    def log_likelihood(theta: Array, datum: Any) -> Array:
        rows = jax.tree_util.tree_map(lambda a: jnp.expand_dims(a, 0), datum)
        trace = constrained_trace(theta, rows, [])
        terms = [site_log_prob(s) for s in trace.values()
                 if s["type"] == "sample" and s["is_observed"] and in_plate(s)]
        return sum(terms[1:], terms[0])

    def log_prior(theta: Array) -> Array:
        log_dets: list = []
        trace = constrained_trace(theta, one_row, log_dets)
        terms = [site_log_prob(s) for s in trace.values()
                 if s["type"] == "sample" and not (s["is_observed"] and in_plate(s))]
        return sum(terms + log_dets, jnp.zeros((), dtype))

    def constrain(theta: Array) -> dict:
        trace = constrained_trace(theta, one_row, [])
        out = {name: trace[name]["value"] for name in latent}
        for name, s in trace.items():  # deterministic sites that do not grow with the data
            if s["type"] == "deterministic" and not in_plate(s) and name not in out:
                if _leading(s["value"]) != 1 or np.ndim(s["value"]) == 0:
                    out[name] = s["value"]
        return out

    def draw_prior(key: Array) -> Array:
        trace = _trace(model_fn, proto_args, proto_kwargs, seed=key)
        return ravel_pytree({name: unconstrained_value(trace[name]) for name in latent})[0].astype(dtype)

    def sample_prior(key: Array, num: int, _data: Any = None) -> Array:
        return jax.vmap(draw_prior)(jax.random.split(key, num))

    def init_params(_data: Any) -> Array:
        # Near NumPyro's init_to_feasible (0 in unconstrained space, the median of a symmetric prior there),
        # but not at 0 itself: there every linear predictor X @ beta is exactly 0, the kink of NumPyro's
        # Bernoulli(logits=...) log-density (max(x, 0) and |x| in binary_cross_entropy_with_logits), whose
        # gradient JAX then gives as y instead of y - 1/2. From that wrong gradient the Laplace fit's first
        # Newton step did not descend, and it stopped at theta = 0 reporting convergence (benchmarks/vs_peers.py
        # found it: coresets projected on that pi_hat were off by up to 170 posterior sd). A small point off
        # every kink (distinct non-zero coordinates) costs nothing, and prior draws would need a compilation
        # of the model before the first coreset; Newton's damped steps converge from here.
        # On the host, in the precision JAX would use (float64 under x64): the same bits as the jnp expression,
        # without its ten eager operations, each compiled on a first call (0.2-0.3 s of every cold stage).
        inner = np.float64 if jax.config.jax_enable_x64 else np.float32
        spread = np.mod(inner(0.5) + inner(_GOLDEN) * np.arange(1, dim + 1).astype(inner), inner(1.0))
        return jax.device_put(np.dtype(dtype).type(INIT_SCALE) * (inner(2.0) * spread - inner(1.0)).astype(dtype))

    name = getattr(model_fn, "__name__", "numpyro_model")
    # jitted: JAX then traces each through NumPyro's handlers once per signature and reuses the jaxpr in every
    # program and transformation that calls it, instead of running the model's Python again each time
    model = Model(log_likelihood=jax.jit(log_likelihood), log_prior=jax.jit(log_prior), init_params=init_params,
                  sample_prior=sample_prior, name=f"numpyro:{name}", dim=dim, constrain=constrain)
    return model, data
