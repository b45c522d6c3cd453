"""The package's warnings name the caller's line, not a line inside coresets_jax, at any call depth: the
public functions are wrapped (`compilation.full_precision`) and call each other (`cj.coreset(...,
certify=True)` certifies), so a fixed `stacklevel` would point into the package (`core.caller`)."""

from __future__ import annotations

import warnings

import jax
import numpy as np

import coresets_jax as cj

KEY = jax.random.key(0)


def _data(n=2000):
    rng = np.random.default_rng(0)
    X = np.c_[rng.normal(size=(n, 2)), np.ones(n)].astype(np.float32)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(X @ np.array([3.0, 3.0, 0.0]))))).astype(np.float32)
    return X, y


def _recorded(call):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        call()
    return [r for r in record if issubclass(r.category, RuntimeWarning)]


def test_a_direct_call_warns_at_the_callers_line():
    record = _recorded(lambda: cj.laplace(cj.models.logistic_regression(), _data(), key=KEY, max_iter=1))
    assert record and "did not converge" in str(record[0].message)
    assert {r.filename for r in record} == {__file__}


def test_a_nested_call_warns_at_the_callers_line():
    # cj.coreset -> its certificate -> warn_if_unreliable: three of the package's frames and two wrappers deep
    record = _recorded(lambda: cj.coreset(cj.models.logistic_regression(), _data(), size=8, method="uniform",
                                          key=KEY, certify=True))
    assert record and any(s in str(record[0].message) for s in ("unreliable", "far from"))
    assert {r.filename for r in record} == {__file__}


def test_stacklevel_counts_the_frames_to_the_first_outside_the_package():
    from coresets_jax.core import caller

    assert caller.stacklevel() == 1  # called from here, outside the package: the calling function itself
