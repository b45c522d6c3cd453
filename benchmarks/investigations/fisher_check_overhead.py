"""Cost of checking the log-likelihood's finiteness inside the Fisher projection (issue 15).

The Fisher features now also evaluate L_n(theta_j) and mark a row NaN where it is not finite: at every
sample with autodiff (value_and_grad), at the first 4 samples with a closed-form gradient. This times the
shipped projection against the same projection without the check (gradients only) and, for the closed
form, against a check at every sample, alternating the variants in one run. All three stream the rows in
chunks of the same size (--chunk; 16384 is the projection's own choice at J = 200, D = 3). Writes
results/fisher_check_overhead.{json,png} (*_quick.* with --quick).

    python benchmarks/investigations/fisher_check_overhead.py [--quick] [--n 20000 --j 200 --reps 7]
"""

from __future__ import annotations

import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's coresets_jax, then common
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402


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


def _extra(p):
    p.add_argument("--n", type=int, default=None, help="rows (20000; --quick: 2000)")
    p.add_argument("--j", type=int, default=None, help="samples (200; --quick: 50)")
    p.add_argument("--reps", type=int, default=None, help="alternating rounds (7; --quick: 2)")
    p.add_argument("--chunk", type=int, default=16384, help="rows per chunk, the same for every variant")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    n = args.n or (2000 if args.quick else 20_000)
    j = args.j or (50 if args.quick else 200)
    reps = args.reps or (2 if args.quick else 7)
    ds = cj.data.synthetic_logistic(jax.random.key(1), n)
    thetas = 0.3 * jax.random.normal(jax.random.key(2), (j, 3)) + jnp.array([3.0, 3.0, 0.0])
    coords = jax.random.randint(jax.random.key(3), (j,), 0, 3)
    closed = cj.models.logistic_regression()
    autodiff = closed._replace(grad_log_likelihood=None)
    rows = {}
    for name, model in (("closed_form", closed), ("autodiff", autodiff)):
        # the shipped projection's pure core; key(3) draws the same coords as above
        shipped = jax.jit(cj.project_fn(model, "fisher", dtype=jnp.float32, chunk_size=args.chunk))
        variants = {"with_check": lambda: shipped(jax.random.key(3), ds.train, thetas),
                    "gradients_only": lambda: _gradients_only(model, ds.train, thetas, coords, args.chunk)}
        if model.grad_log_likelihood is not None:
            variants["check_every_sample"] = lambda: _check_every_sample(model, ds.train, thetas, coords, args.chunk)
        new, old = variants["with_check"](), variants["gradients_only"]()
        assert bool(jnp.allclose(new, old, rtol=1e-6, atol=1e-7))  # the same V where L_n is finite
        times = common.alternate(variants, reps, runs=True)  # notes.md: +-20% run to run, so side by side
        med = {k: float(np.median(v)) for k, v in times.items()}
        rows[name] = {"median_s": med, "ratio": med["with_check"] / med["gradients_only"], "times_s": times,
                      "ratio_every_sample": med.get("check_every_sample", med["with_check"]) / med["gradients_only"]}
        print(name, {k: round(v, 4) for k, v in med.items()}, "ratio", round(rows[name]["ratio"], 3), flush=True)
    out = {"quick": bool(args.quick), "environment": common.environment(), "n": n, "j": j, "reps": reps,
           "chunk_size": args.chunk, "results": rows}
    stem = common.stem("fisher_check_overhead", args.quick)
    common.write_json(out, args.out, stem)
    plot(out, args.out, stem)
    return out


def plot(out, out_dir, stem):
    rows = out["results"]
    fig, axes = common.figure(1, 1, size=(5.0, 3.0))
    ax = axes[0][0]
    names = list(rows)
    for k, (label, color) in enumerate((("gradients_only", "tab:gray"), ("with_check", "tab:blue"),
                                        ("check_every_sample", "tab:orange"))):
        ax.bar([i + 0.27 * k for i in range(len(names))],
               [1e3 * rows[n]["median_s"].get(label, float("nan")) for n in names],
               0.27, label=label.replace("_", " "), color=color)
    ax.set_xticks([i + 0.27 for i in range(len(names))],
                  [f"{n}\nshipped check x{rows[n]['ratio']:.2f}" for n in names])
    ax.set_ylabel("median ms per projection")
    ax.set_title(f"Fisher projection, N = {out['n']}, J = {out['j']}", fontsize=10)
    ax.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
