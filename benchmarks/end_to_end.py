"""End-to-end speed-up at equal posterior quality (issue 5, target 4; HC §7.4).

At N = 10^6 (HC §7.2 synthetic logistic regression) compare
  A: coreset construction (Laplace, Fisher projection J = 500, GIGA M = 1000, compressed) + NUTS on the coreset
  B: NUTS on the full data
with the same NUTS settings. Quality: 1-Wasserstein distance of each run to the full-data samples, against
the W1 between the two full-data chains (the Monte Carlo noise floor), and test log-likelihood.

Writes benchmarks/results/end_to_end.json and end_to_end.png.

    python benchmarks/end_to_end.py [--n 1000000] [--method giga] [--size 1000] [--features 500]
                                    [--laplace-subsample ROWS] [--samples 500] [--warmup 500] [--tag _x]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import numpy as np

import coresets_jax as cj

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    jax.block_until_ready(jax.tree_util.tree_leaves(out))
    return out, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--method", default="giga")
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--features", type=int, default=500, help="J")
    parser.add_argument("--laplace-subsample", type=int, default=None,
                        help="fit pi_hat on this many random rows (scaled by N / rows)")
    parser.add_argument("--tag", default="", help="suffix of the output file names")
    parser.add_argument("--out", default=os.path.join(HERE, "results"))
    args = parser.parse_args()

    key = jax.random.key(0)
    k_data, k_cs, k_full, k_core = jax.random.split(key, 4)
    ds = cj.data.synthetic_logistic(k_data, args.n, num_test=10_000)
    model = cj.models.logistic_regression()
    nuts = dict(method="nuts", num_samples=args.samples, num_warmup=args.warmup, num_chains=2)

    print(f"coreset construction, N = {args.n}", flush=True)
    def construct():
        k_pi, k_rest = jax.random.split(k_cs)
        pi_hat = cj.laplace(model, ds.train, key=k_pi, subsample=args.laplace_subsample)
        return cj.coreset(model, ds.train, args.size, args.method, k_rest, num_features=args.features,
                          pi_hat=pi_hat)

    cs, t_build = timed(construct)
    print(f"  {t_build:.1f} s, {cs.num_points} points, info rank {cs.info.get('rank')}", flush=True)
    print("NUTS on the coreset", flush=True)
    post_cs, t_cs = timed(lambda: cj.sample(model, ds.train, k_core, weights=cs, **nuts))
    print(f"  {t_cs:.1f} s", flush=True)
    print("NUTS on the full data", flush=True)
    post_full, t_full = timed(lambda: cj.sample(model, ds.train, k_full, **nuts))
    print(f"  {t_full:.1f} s", flush=True)

    full = np.asarray(post_full.samples)
    full_flat = full.reshape(-1, full.shape[-1])
    core_flat = np.asarray(post_cs.samples).reshape(-1, full.shape[-1])
    w1_floor = float(cj.metrics.wasserstein1(full[0], full[1]))
    w1_core = float(cj.metrics.wasserstein1(core_flat, full_flat))
    tll_full = float(cj.metrics.test_log_likelihood(model, ds.test, full_flat))
    tll_core = float(cj.metrics.test_log_likelihood(model, ds.test, core_flat))
    t_coreset_total = t_build + t_cs
    report = {
        "n": args.n, "size": args.size, "method": args.method, "num_points": cs.num_points,
        "num_features": args.features, "laplace_subsample": args.laplace_subsample,
        "nuts": {k: v for k, v in nuts.items()},
        "seconds": {"coreset_construction": t_build, "nuts_coreset": t_cs, "coreset_total": t_coreset_total,
                    "nuts_full": t_full},
        "wall_clock_ratio_full_over_coreset": t_full / t_coreset_total,
        "wall_clock_ratio_coreset_over_full": t_coreset_total / t_full,
        "w1": {"coreset_vs_full": w1_core, "full_chain0_vs_chain1": w1_floor,
               "normalised": float(cj.metrics.normalized_wasserstein1(w1_core, w1_floor))},
        "test_log_likelihood": {"full": tll_full, "coreset": tll_core,
                                "normalised": tll_core / tll_full},
        "rhat_max": {"full": float(np.nanmax(post_full.rhat)), "coreset": float(np.nanmax(post_cs.rhat))},
        "notes": "Times include compilation (one call each, as a user would run it). W1 is exact optimal "
                 "assignment on subsamples (cj.metrics.wasserstein1). The noise floor is W1 between the two "
                 "full-data chains. Measured on a shared 2-core CPU.",
        "device": str(jax.devices()[0]),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"end_to_end{args.tag}.json"), "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
        a.bar(["construct", "NUTS coreset", "NUTS full"], [t_build, t_cs, t_full],
              color=["tab:blue", "tab:blue", "tab:gray"])
        a.set_ylabel("seconds")
        a.set_title(f"N = {args.n}: coreset total / full = {t_coreset_total / t_full:.3f}")
        b.scatter(full_flat[:, 0], full_flat[:, 1], s=3, alpha=0.4, label="full data")
        b.scatter(core_flat[:, 0], core_flat[:, 1], s=3, alpha=0.4, label=f"{args.method} M={args.size}")
        b.set_xlabel("theta_0")
        b.set_ylabel("theta_1")
        b.legend()
        b.set_title(f"W1 {w1_core:.4f} (chain-to-chain {w1_floor:.4f})")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"end_to_end{args.tag}.png"), dpi=110)
    except ImportError:
        print("matplotlib missing: no PNG written")


if __name__ == "__main__":
    main()
