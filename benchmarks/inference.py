"""Benchmark: NUTS on the full data against NUTS on coresets (issue 4).

Synthetic logistic regression of HC §7.2 (x ~ N(0, I_2), intercept, theta = [3, 3, 0]) with N = 100,000
training rows and 1,000 held-out rows. NUTS (BlackJAX, window adaptation) runs on the full data and on
coresets of size M = 100 and 1,000 built by `cj.coreset` (Laplace pi_hat, Fisher projection, J = 500) with
GIGA and Frank–Wolfe. Reported per run:

- wall time of the sampler (compiled once per shape; the timed call is a second, already-compiled call),
  coreset construction time, and their sum;
- ESS per second (minimum over coordinates of bulk ESS / sampler wall time);
- W1 to the pooled full-data samples, raw and normalised by the median pairwise W1 between independent
  full-data runs (HC §7.3);
- normalised negative test log-likelihood (HC §7.3) and Laplace forward/reverse KL (IHT appendix D).

Run:  .venv/bin/python benchmarks/inference.py   (about 3 minutes on 2 CPU cores)
Writes benchmarks/results/inference.json and benchmarks/results/inference.png.
"""

from __future__ import annotations

import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj
from coresets_jax import metrics

N = 100_000
NUM_TEST = 1_000
SIZES = (100, 1_000)
METHODS = ("giga", "frank_wolfe")
NUM_FULL_RUNS = 3
SETTINGS = dict(method="nuts", num_samples=1000, num_warmup=1000, num_chains=2)
W1_POINTS = 1000

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "results")


def summarize(post, reference, w1_scale, model, test, tll_full):
    w1 = metrics.wasserstein1(post.samples, reference, max_points=W1_POINTS)
    tll = float(metrics.test_log_likelihood(model, test, post.samples))
    return {
        "sampler_wall_time_s": post.wall_time,
        "init_time_s": post.init_time,
        "min_ess": float(jnp.min(post.ess)),
        "ess_per_second": float(jnp.min(post.ess)) / post.wall_time,
        "max_rhat": float(jnp.max(post.rhat)),
        "divergences": int(jnp.sum(post.num_divergent)),
        "acceptance_rate": [float(a) for a in post.acceptance_rate],
        "step_size": [float(s) for s in post.step_size],
        "posterior_mean": [float(m) for m in post.mean],
        "w1_to_full": w1,
        "w1_normalized": float(metrics.normalized_wasserstein1(w1, w1_scale)),
        "test_log_likelihood": tll,
        "normalized_neg_test_ll": None if tll_full is None else float(
            metrics.normalized_test_log_likelihood(tll, tll_full)),
    }


def main():
    key = jax.random.key(2019)
    k_data, k_full, k_cs, k_run = jax.random.split(key, 4)
    ds = cj.data.synthetic_logistic(k_data, N, num_test=NUM_TEST)
    model = cj.models.logistic_regression()
    data, test = ds.train, ds.test
    t_start = time.perf_counter()

    # Full data: NUM_FULL_RUNS independent runs; the first call compiles, the later ones are timed warm.
    full_runs = []
    for i, k in enumerate(jax.random.split(k_full, NUM_FULL_RUNS)):
        post = cj.sample(model, data, k, **SETTINGS)
        print(f"full run {i}: {post}", flush=True)
        full_runs.append(post)
    warm_full = [p for p in full_runs if not p.compiled]
    reference = np.concatenate([np.asarray(p.flat_samples) for p in full_runs])
    w1_pairs = metrics.median_pairwise_wasserstein1([p.samples for p in full_runs], max_points=W1_POINTS)
    tll_full = float(metrics.test_log_likelihood(model, test, reference))
    full_laplace = cj.laplace(model, data)

    # Full-data summary from a warm run, with W1 to the pooled samples of the other runs.
    others = np.concatenate([np.asarray(p.flat_samples) for p in full_runs if p is not warm_full[0]])
    full = summarize(warm_full[0], others, w1_pairs, model, test, tll_full)
    full["first_call_wall_time_s"] = full_runs[0].wall_time
    full["sampler_wall_time_s"] = float(np.median([p.wall_time for p in warm_full]))
    full["ess_per_second"] = float(np.median([float(jnp.min(p.ess)) / p.wall_time for p in warm_full]))
    results = {"full": full, "coresets": []}

    for i, method in enumerate(METHODS):
        for size, k in zip(SIZES, jax.random.split(jax.random.fold_in(k_cs, i), len(SIZES))):
            t0 = time.perf_counter()
            cs = cj.coreset(model, data, size, method, k)
            jax.block_until_ready(cs.weights)
            build_time = time.perf_counter() - t0
            first = cj.sample(model, data, jax.random.fold_in(k_run, size), weights=cs, **SETTINGS)
            post = cj.sample(model, data, jax.random.fold_in(k_run, size + 1), weights=cs, **SETTINGS)
            assert not post.compiled
            row = summarize(post, reference, w1_pairs, model, test, tll_full)
            kl = metrics.laplace_kl(model, data, cs, full=full_laplace)
            row.update({
                "method": method, "size": size, "num_points": cs.num_points,
                "build_time_s": build_time, "first_call_wall_time_s": first.wall_time,
                "total_time_s": build_time + post.init_time + post.wall_time,
                "speedup_sampler": full["sampler_wall_time_s"] / post.wall_time,
                "speedup_total": (full["sampler_wall_time_s"] + full["init_time_s"])
                / (build_time + post.init_time + post.wall_time),
                "laplace_kl_forward": float(kl["forward"]), "laplace_kl_reverse": float(kl["reverse"]),
            })
            print(f"{method} M={size} ({cs.num_points} points): {post}; W1={row['w1_to_full']:.4f} "
                  f"(normalised {row['w1_normalized']:.2f}), speedup {row['speedup_sampler']:.1f}x",
                  flush=True)
            results["coresets"].append(row)

    results["config"] = {
        "dataset": "synthetic_logistic (HC 7.2), theta = [3, 3, 0]", "N": N, "num_test": NUM_TEST,
        "sizes": list(SIZES), "construction": "cj.coreset: Laplace pi_hat, Fisher norm, J = 500",
        "construction_methods": list(METHODS), **SETTINGS, "num_full_runs": NUM_FULL_RUNS,
        "w1": f"exact optimal assignment on {W1_POINTS}-point subsamples (scipy linear_sum_assignment)",
        "w1_reference_median_pairwise_full": w1_pairs,
        "timing": "sampler wall time of an already-compiled call; first_call includes compilation",
        "ess": "min over coordinates of blackjax.diagnostics.ess_bulk",
        "jax": jax.__version__, "platform": platform.platform(), "cpu_count": os.cpu_count(),
        "devices": [str(d) for d in jax.devices()], "benchmark_wall_time_s": time.perf_counter() - t_start,
    }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "inference.json"), "w") as f:
        json.dump(results, f, indent=2)
    plot(results)
    print(json.dumps({"full_sampler_s": full["sampler_wall_time_s"],
                      "coresets": [(r["method"], r["size"], round(r["sampler_wall_time_s"], 3),
                                    round(r["speedup_sampler"], 1), round(r["w1_normalized"], 2))
                                   for r in results["coresets"]]}, indent=1))


def plot(results):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = results["full"]
    rows = results["coresets"]
    names = {"giga": "GIGA", "frank_wolfe": "FW"}
    labels = ["full\nN=100k"] + [f"{names.get(r['method'], r['method'])}\nM={r['size']}" for r in rows]
    times = [full["sampler_wall_time_s"]] + [r["sampler_wall_time_s"] for r in rows]
    ess_s = [full["ess_per_second"]] + [r["ess_per_second"] for r in rows]
    w1 = [full["w1_normalized"]] + [r["w1_normalized"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    colors = ["tab:gray"] + ["tab:blue" if r["method"] == "giga" else "tab:orange" for r in rows]
    titles = ("NUTS wall time (s)", "min ESS per second", "W1 / median full-vs-full W1")
    for ax, values, title, log in zip(axes, (times, ess_s, w1), titles, (True, True, True)):
        ax.bar(range(len(values)), values, color=colors)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
    axes[2].axhline(1.0, color="k", lw=0.8, ls="--")
    fig.suptitle("NUTS on synthetic logistic regression (HC 7.2): full data vs coresets "
                 f"({results['config']['num_chains']} chains x {results['config']['num_samples']} draws)")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "inference.png"), dpi=110)


if __name__ == "__main__":
    main()
