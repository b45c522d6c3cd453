"""Every public function evaluates the model and solves in full float32 dot products, whatever JAX's default.

JAX computes float32 products in TensorFloat-32 on recent NVIDIA GPUs and in bfloat16 on TPUs unless told
otherwise; the package asks for "float32" (`compilation.full_precision`). These tests run under a caller's
`jax.default_matmul_precision("bfloat16")`, the TPU-like default, on the CPU, and check what was traced:
- a model that records JAX's precision setting each time it is traced sees "float32" in every stage;
- the programs that `*_fn` factories return, jitted by the caller, lower every dot_general at HIGHEST.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import compilation

KEY = jax.random.key(0)


def _data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = np.c_[rng.normal(size=(n, d - 1)), np.ones(n)].astype(np.float32)
    p = 1.0 / (1.0 + np.exp(-(X @ np.array([1.0, -0.5, 0.3])[:d])))
    y = (rng.random(n) < p).astype(np.float32)
    return X, y


def _recording_model(seen: list):
    def log_likelihood(theta, datum):
        seen.append(jax.config.jax_default_matmul_precision)
        x, y = datum
        eta = jnp.dot(x, theta)
        return y * eta - jnp.logaddexp(0.0, eta)

    return cj.Model(log_likelihood=log_likelihood, log_prior=lambda t: -0.5 * jnp.sum(t ** 2), dim=3,
                    name="recording")


def _dot_precisions(text: str) -> list:
    lines = [line for line in text.splitlines() if "stablehlo.dot_general" in line]
    found = [re.search(r"precision = \[(\w+), (\w+)\]", line) for line in lines]
    return [m.groups() if m else ("DEFAULT", "DEFAULT") for m in found]


def test_every_stage_traces_the_model_in_full_float32():
    seen: list = []
    model, data = _recording_model(seen), _data()
    with jax.default_matmul_precision("bfloat16"):
        cs = cj.coreset(model, data, size=20, method="omp", key=KEY)
        assert seen and set(seen) == {"float32"}, set(seen)
        seen.clear()
        post = cj.sample(model, data, KEY, weights=cs, num_samples=50, num_warmup=50, num_chains=1, warn=False)
        cj.certify(model, data, cs, post.samples)
        cj.laplace(model, data, key=KEY)
        cj.log_joint(model, jnp.zeros(3), data)
        assert seen and set(seen) == {"float32"}, set(seen)
    seen.clear()
    cj.log_likelihoods(model, jnp.zeros(3), data)  # outside any caller's setting too
    assert set(seen) == {"float32"}


def test_factory_programs_lower_every_product_at_highest():
    model, data = cj.models.logistic_regression(), _data()
    V = jax.random.normal(KEY, (200, 40))
    programs = {
        "build_fn omp": (cj.build_fn("omp", 10), (V, KEY)),
        "coreset_fn coreset_mcmc": (cj.coreset_fn(model, "coreset_mcmc", 10, num_iters=20, hot_start=False,
                                                  num_draws=4), (KEY, data)),
        "laplace_fn": (cj.laplace_fn(model), (data, jnp.zeros(3))),
    }
    with jax.default_matmul_precision("bfloat16"):
        for name, (fn, args) in programs.items():
            precisions = _dot_precisions(jax.jit(fn).lower(*args).as_text())
            assert precisions, name  # the program multiplies matrices at all
            assert all(p == ("HIGHEST", "HIGHEST") for p in precisions), (name, set(precisions))


def test_the_switch_leaves_jax_default_in_force(monkeypatch):
    monkeypatch.setattr(compilation, "MATMUL_PRECISION", None)
    seen: list = []
    with jax.default_matmul_precision("bfloat16"):
        cj.log_likelihoods(_recording_model(seen), jnp.zeros(3), _data())
    assert set(seen) == {"bfloat16"}


@pytest.mark.parametrize("factory", ["build_fn", "coreset_fn", "sample_fn", "laplace_fn", "project_fn"])
def test_factories_keep_their_names_and_documentation(factory):
    fn = getattr(cj, factory)
    assert fn.__name__ == factory and fn.__doc__ and "full_precision" not in fn.__doc__


def test_metrics_multiply_in_full_float32():
    mean, cov = jnp.zeros(3), jnp.eye(3) * 2.0
    with jax.default_matmul_precision("bfloat16"):
        precisions = _dot_precisions(jax.jit(cj.metrics.gaussian_kl).lower(mean, cov, mean + 1.0, cov).as_text())
        seen: list = []
        X, y = _data(50)
        cj.metrics.test_log_likelihood(_recording_model(seen), (X, y), jnp.zeros((4, 3)))
    assert precisions and all(p == ("HIGHEST", "HIGHEST") for p in precisions), set(precisions)
    assert seen and set(seen) == {"float32"}
