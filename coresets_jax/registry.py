"""One registry of constructions, for both kinds of method.

A construction declares what it needs and how to make its pure core:

- `needs="vectors"`: a Hilbert-coreset solver on projected vectors V (HC Eq. 3.2). `make(size, **options)`
  returns a `solvers.base.Solver`; `cj.build`, `cj.build_fn`, `cj.merged_coreset` and `cj.stream_coreset`
  drive it with `solvers.base.run`.
- `needs="posterior"`: a construction that works on the model and the data rather than on V: the
  posterior-driven methods, which sample the coreset posterior pi_w themselves (Sparse VI, Coreset MCMC,
  quasi-Newton), and LR's sensitivity sampling ("sensitivity"). `make(model, size, **options)` returns a pure

      solve(key, data, start, data_weights) -> (indices, weights, info)

  (the key first, then the arguments in the order of the public `cj.coreset_fn(...)(key, data, start,
  data_weights)`, so a method author and a user see one signature),
  where `data_weights` (N,) weights the rows of the full-data target (ones for a dataset, the merged weights
  in a streaming reduction, 0 on padding) and `start` is a `Start(mean, cov)` from pi_hat that starts and
  preconditions chains. `cj.coreset`, `cj.coreset_fn`, `cj.merged_coreset(model=..., data=...)` and
  `cj.stream_coreset` drive it.

Both kinds declare whether they are random (then a key is required) and their options, which are read off
`make`'s keyword parameters, so `cj.build`, `cj.coreset` and the CLI validate options by one rule. A new
method is one file plus one `register` call; compositions accept a `Construction` object wherever they take a
method name.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from typing import Any, Callable, NamedTuple, Optional

import jax

__all__ = ["Construction", "METHODS", "POSTERIOR_METHODS", "Start", "methods", "register", "resolve", "scoped"]

KINDS = ("vectors", "posterior")


class Start(NamedTuple):
    """pi_hat's Gaussian summary for a posterior-driven construction: chain starts and preconditioning."""

    mean: jax.Array
    cov: jax.Array


class Construction(NamedTuple):
    """A coreset construction.

    Attributes:
      name: the method name (`cj.build(..., method=name)`).
      make: `(size, **options) -> Solver` for vectors; `(model, size, **options) -> solve` for posterior.
      needs: "vectors" or "posterior".
      random: whether the result depends on the key (then `cj.build` requires one).
      description: one line for `coresets-jax info` and error messages.
      default_support: the vector method whose coreset `cj.coreset(support=None)` starts a posterior
        method from; None: its own start (a uniform subsample, as the papers).
      takes_start: whether the posterior core accepts a starting coreset (`initial`): then
        `cj.coreset(support=...)` and `cj.refine` can start it from any coreset.
      uses_pi_hat: whether the posterior core is started from pi_hat (a Laplace fit on all N rows by
        default); False: from the model's zero theta with identity covariance, unless `pi_hat` is given,
        so that no full-data pass is made (Coreset MCMC and quasi-Newton as published).
      aliases: (old name, option) pairs: documented old names of options, renamed by `check_options`
        (e.g. Sparse VI's `sampler` for `kernel`; `posterior_driven/options.py`).
    """

    name: str
    make: Callable[..., Any]
    needs: str = "vectors"
    random: bool = False
    description: str = ""
    default_support: Optional[str] = None
    aliases: tuple = ()
    takes_start: bool = False
    uses_pi_hat: bool = True

    @property
    def options(self) -> dict:
        """Option names with their defaults, from `make`'s keyword parameters."""
        skip = {"size", "model"}
        params = inspect.signature(self.make).parameters.values()
        return {p.name: p.default for p in params
                if p.name not in skip and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    def rename_aliases(self, options: dict) -> dict:
        """`options` with each alias replaced by its option's name; ValueError if both are given."""
        out = dict(options)
        for old, new in self.aliases:
            if old in out:
                if new in out:
                    raise ValueError(f"{old}, {new}: {old!r} is an alias of {new!r} for method {self.name!r}; "
                                     "give only one of them")
                out[new] = out.pop(old)
        return out

    def alias_note(self) -> str:
        """'; also accepted: old (for new), ...' for error messages ('' without aliases)."""
        pairs = ", ".join(f"{old} (for {new})" for old, new in self.aliases)
        return f"; also accepted: {pairs}" if pairs else ""

    def check_options(self, options: dict) -> tuple:
        """Options (aliases renamed) as a sorted, hashable tuple; ValueError for an unknown name, an option
        given under both its names, or a non-static value."""
        allowed = self.options
        out = {}
        for name, value in self.rename_aliases(options).items():
            if name not in allowed:
                raise ValueError(f"{name}: not an option of method {self.name!r}; its options are "
                                 f"{sorted(allowed)}{self.alias_note()}")
            if isinstance(value, dict) and isinstance(allowed[name], tuple):
                # A settings dict (e.g. kernel_settings) becomes sorted (name, value) pairs, so it hashes.
                value = tuple(sorted(value.items()))
                if not all(isinstance(k, str) and _is_scalar(v) for k, v in value):
                    raise ValueError(f"{name}: expected a dict of names to plain Python scalars, got {value!r}")
            elif not _is_scalar(value) and not (isinstance(value, tuple) and isinstance(allowed[name], tuple)):
                raise ValueError(f"{name}: options must be plain Python scalars or strings, got "
                                 f"{type(value).__name__}")
            out[name] = value
        return tuple(sorted(out.items()))


def _is_scalar(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


_REGISTRY: dict[str, Construction] = {}


def register(construction: Construction, *, replace: bool = False) -> Construction:
    """Add a construction under its name (ValueError if the name is taken, unless `replace`)."""
    if not isinstance(construction, Construction):
        raise ValueError(f"construction: expected a cj.Construction, got {type(construction).__name__}")
    if construction.needs not in KINDS:
        raise ValueError(f"construction.needs: expected one of {list(KINDS)}, got {construction.needs!r}")
    if not callable(construction.make):
        raise ValueError("construction.make: must be callable")
    aliases = construction.aliases
    if not isinstance(aliases, tuple) or (aliases and not all(
            isinstance(p, tuple) and len(p) == 2 and p[1] in construction.options
            and p[0] not in construction.options for p in aliases)):
        raise ValueError("construction.aliases: expected (old name, option) pairs naming options of make, "
                         f"with old names that are not options themselves; got {construction.aliases!r}")
    if construction.name in _REGISTRY and not replace:
        raise ValueError(f"construction.name: {construction.name!r} is already registered; pass "
                         "replace=True to override it")
    _REGISTRY[construction.name] = construction
    return construction


@contextlib.contextmanager
def scoped():
    """A context in which `register` calls are undone on exit, e.g. a test's own toy methods:

        with cj.registry.scoped():
            cj.register(cj.Construction("toy", make))
            ...                                   # "toy" is registered here
        # and gone here; the registry is as it was
    """
    saved = dict(_REGISTRY)
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved)


def resolve(method: Any, needs: str | None = None, argument: str = "method") -> Construction:
    """The `Construction` for a registered name or a `Construction` object.

    With `needs`, a method of the other kind raises a ValueError that says where it can be used.
    """
    if isinstance(method, Construction):
        construction = method
    elif isinstance(method, str) and method in _REGISTRY:
        construction = _REGISTRY[method]
    else:
        raise ValueError(f"{argument}: unknown value {method!r}; expected one of {sorted(_REGISTRY)} or a "
                         "cj.Construction")
    if needs is not None and construction.needs != needs:
        if construction.needs == "posterior":
            raise ValueError(f"{argument}: {construction.name!r} samples the coreset posterior, so it needs "
                             "the model and data, not projected vectors: use cj.coreset(model, data, ...)")
        raise ValueError(f"{argument}: {construction.name!r} works on projected vectors; use cj.build, "
                         "or cj.coreset to project first")
    return construction


class _Names(Sequence):
    """A live, read-only view of the registered names of one kind (it sees later `register` calls)."""

    def __init__(self, needs: str):
        self._needs = needs

    def _names(self) -> tuple:
        return tuple(n for n, c in _REGISTRY.items() if c.needs == self._needs)

    def __getitem__(self, i):
        return self._names()[i]

    def __len__(self) -> int:
        return len(self._names())

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other)

    def __hash__(self):
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


METHODS = _Names("vectors")              # what `cj.build` accepts
POSTERIOR_METHODS = _Names("posterior")  # what only `cj.coreset` accepts


def methods() -> dict[str, Construction]:
    """Every registered construction by name."""
    return dict(_REGISTRY)
