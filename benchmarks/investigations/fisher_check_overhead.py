"""Cost of checking the log-likelihood's finiteness inside the Fisher projection (issue 15).

The Fisher features now also evaluate L_n(theta_j) and mark a row NaN where it is not finite: at every
sample with autodiff (value_and_grad), at the first 4 samples with a closed-form gradient. This times the
shipped projection against the same projection without the check (gradients only) and, for the closed
form, against a check at every sample, alternating the variants in one run. Writes benchmarks/results/fisher_check_overhead.json.

    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/investigations/fisher_check_overhead.py [--n 20000 --j 200 --reps 7]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp

import coresets_jax as cj
from coresets_jax import projection


@functools.partial(jax.jit, static_argnames=("model", "chunk_size"))
def _gradients_only(model, data, thetas, coords, chunk_size):
    """The Fisher projection as it was: gradients only, no look at L_n itself."""
    grad_fn = model.grad_log_likelihood or jax.grad(model.log_likelihood)
    cols = jnp.arange(thetas.shape[0])
    scale = jnp.sqrt(thetas.shape[1] / thetas.shape[0]).astype(thetas.dtype)

    def features(datum):
        return jax.vmap(grad_fn, in_axes=(0, None))(thetas, datum)[cols, coords] * scale

    return jax.lax.map(features, data, batch_size=chunk_size)


@functools.partial(jax.jit, static_argnames=("model", "chunk_size"))
def _check_every_sample(model, data, thetas, coords, chunk_size):
    """The check at every sample with a closed-form gradient: L_n(theta_j) for all j, beside the gradient."""
    cols = jnp.arange(thetas.shape[0])
    scale = jnp.sqrt(thetas.shape[1] / thetas.shape[0]).astype(thetas.dtype)

    def features(datum):
        lls = jax.vmap(model.log_likelihood, in_axes=(0, None))(thetas, datum)
        grads = jax.vmap(model.grad_log_likelihood, in_axes=(0, None))(thetas, datum)
        return jnp.where(jnp.all(jnp.isfinite(lls)), grads[cols, coords], jnp.nan) * scale

    return jax.lax.map(features, data, batch_size=chunk_size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--j", type=int, default=200)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    ds = cj.data.synthetic_logistic(jax.random.key(1), args.n)
    thetas = 0.3 * jax.random.normal(jax.random.key(2), (args.j, 3)) + jnp.array([3.0, 3.0, 0.0])
    coords = jax.random.randint(jax.random.key(3), (args.j,), 0, 3)
    chunk = projection.default_chunk(args.j, 3)
    closed = cj.models.logistic_regression()
    autodiff = closed._replace(grad_log_likelihood=None)
    rows = {}
    for name, model in (("closed_form", closed), ("autodiff", autodiff)):
        # the shipped projection's pure core; key(3) draws the same coords as above
        shipped = jax.jit(cj.project_fn(model, "fisher", dtype=jnp.float32, chunk_size=chunk))
        new = lambda: shipped(jax.random.key(3), ds.train, thetas)
        old = lambda: _gradients_only(model, ds.train, thetas, coords, chunk)
        every = lambda: _check_every_sample(model, ds.train, thetas, coords, chunk)
        assert bool(jnp.allclose(new(), old(), rtol=1e-6, atol=1e-7))  # the same V where L_n is finite
        variants = [("with_check", new), ("gradients_only", old)]
        if model.grad_log_likelihood is not None:
            variants.append(("check_every_sample", every))
        times = {label: [] for label, _ in variants}
        for _ in range(args.reps):  # alternate the variants (notes.md: +-20% run to run)
            for label, fn in variants:
                start = time.perf_counter()
                fn().block_until_ready()
                times[label].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows[name] = {"median_s": med, "ratio": med["with_check"] / med["gradients_only"], "times_s": times,
                      "ratio_every_sample": med.get("check_every_sample", med["with_check"]) / med["gradients_only"]}
        print(name, {k: round(v, 4) for k, v in med.items()}, "ratio", round(rows[name]["ratio"], 3))
    out = {"device": f"{platform.machine()} CPU, shared 2 cores (loaded by other jobs)", "jax": jax.__version__,
           "n": args.n, "j": args.j, "reps": args.reps, "results": rows}
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results",
                        "fisher_check_overhead.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    names = list(rows)
    for k, (label, color) in enumerate((("gradients_only", "tab:gray"), ("with_check", "tab:blue"),
                                        ("check_every_sample", "tab:orange"))):
        ax.bar([i + 0.27 * k for i in range(len(names))],
               [1e3 * rows[n]["median_s"].get(label, float("nan")) for n in names],
               0.27, label=label.replace("_", " "), color=color)
    ax.set_xticks([i + 0.27 for i in range(len(names))],
                  [f"{n}\nshipped check x{rows[n]['ratio']:.2f}" for n in names])
    ax.set_ylabel("median ms per projection")
    ax.set_title(f"Fisher projection, N = {args.n}, J = {args.j}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path.replace(".json", ".png"), dpi=110)


if __name__ == "__main__":
    main()
