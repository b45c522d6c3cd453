"""IHT §5.1: Gaussian posterior with closed-form vectors and closed-form forward KL, every A-IHT start.

Model: theta ~ N(0, I_D), x_n ~ N(theta, I_D), so the posterior is N(sum x / (1 + N), I / (1 + N)) and a
weighted coreset posterior is closed form too (HC Eq. 6.4). The vectors are the exact centred L2(pi)
features (IHT §2 with pi_hat = pi and no sampling): with theta = mean + e, e ~ N(0, s I), s = 1 / (1 + N),

    L_n - E L_n = (x_n - mean)^T e - (|e|^2 - D s) / 2,
    <g_n, g_m> = s (x_n - mean)^T (x_m - mean) + D s^2 / 2,

so v_n = [sqrt(s) (x_n - mean), sqrt(D / 2) s] reproduces every inner product (rank D + 1).
Forward KL(pi || pi_w) is closed form (float64). Two settings:
  - "miniature": D = 20, N = 200 (tests/test_iht.py), K in {5, 10, 15, 20, 30, 50, 100};
  - "paper": D = 200, N = 600 (IHT §5.1), K in {10, 25, 50, 100, 150, 200, 250, 300}.
Methods: uniform, GIGA, OMP, A-IHT (default), and A-IHT II from the zero start (Algorithm 3 as printed),
from the GIGA start, and the default (both starts). Median and quartiles over the trials (the paper uses 10).

    .venv/bin/python benchmarks/iht_gaussian.py [--trials 10] [--quick]

writes benchmarks/results/iht_gaussian.json and iht_gaussian.png (iht_gaussian_quick.* with --quick).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj

HERE = os.path.dirname(os.path.abspath(__file__))
# (label, method, options)
VARIANTS = (("uniform", "uniform", {}), ("giga", "giga", {}), ("omp", "omp", {}), ("iht", "iht", {}),
            ("iht2_zero_start", "iht2", {"init": "zero"}), ("iht2_giga_start", "iht2", {"init": "giga"}),
            ("iht2", "iht2", {}))
SETTINGS = {"miniature": (20, 200, (5, 10, 15, 20, 30, 50, 100)),
            "paper": (200, 600, (10, 25, 50, 100, 150, 200, 250, 300))}


def exact_vectors(x: np.ndarray) -> np.ndarray:
    n, d = x.shape
    s = 1.0 / (1.0 + n)
    mean = x.sum(0) * s
    return np.concatenate([np.sqrt(s) * (x - mean), np.full((n, 1), np.sqrt(d / 2.0) * s)], axis=1)


def forward_kl(x: np.ndarray, w: np.ndarray) -> float:
    """KL(N(m1, s1 I) || N(m2, s2 I)) between the full and the weighted posterior, float64."""
    d = x.shape[1]
    s1, s2 = 1.0 / (1.0 + len(x)), 1.0 / (1.0 + w.sum())
    m1, m2 = x.sum(0) * s1, (w @ x) * s2
    return 0.5 * (d * s1 / s2 + np.sum((m2 - m1) ** 2) / s2 - d + d * np.log(s2 / s1))


def run_setting(name: str, trials: int, Ks) -> dict:
    D, N, _ = SETTINGS[name]
    kl = {label: {K: [] for K in Ks} for label, _, _ in VARIANTS}
    l2 = {label: {K: [] for K in Ks} for label, _, _ in VARIANTS}
    greedy_won = {K: [] for K in Ks}
    for trial in range(trials):
        k_theta, k_data, k_alg = jax.random.split(jax.random.key(1000 + trial), 3)
        theta = np.asarray(jax.random.normal(k_theta, (D,)), np.float64)
        x = theta + np.asarray(jax.random.normal(k_data, (N, D)), np.float64)
        V64 = exact_vectors(x)
        V = jnp.asarray(V64, jnp.float32)
        y = V64.sum(0)
        for K in Ks:
            for label, method, options in VARIANTS:
                cs = cj.build(V, K, method, key=k_alg, **options)
                w = np.asarray(cs.dense(N), np.float64)
                kl[label][K].append(forward_kl(x, w))
                r = y - w @ V64
                l2[label][K].append(float(r @ r))
                if label == "iht2":
                    greedy_won[K].append(bool(cs.info["greedy_start"]))
        print(f"{name}: trial {trial + 1}/{trials} done", flush=True)

    def summary(values):
        v = np.asarray(values)
        return {"median": float(np.median(v)), "q25": float(np.percentile(v, 25)),
                "q75": float(np.percentile(v, 75)), "trials": v.tolist()}

    out = {"D": D, "N": N, "K": list(Ks), "forward_kl": {}, "l2_objective": {}}
    for label, _, _ in VARIANTS:
        out["forward_kl"][label] = {str(K): summary(kl[label][K]) for K in Ks}
        out["l2_objective"][label] = {str(K): summary(l2[label][K]) for K in Ks}
    g = {K: np.asarray(kl["giga"][K]) for K in Ks}
    out["fraction_of_trials_kl_le_giga"] = {
        label: {str(K): float(np.mean(np.asarray(kl[label][K]) <= g[K] * (1 + 1e-6) + 1e-9)) for K in Ks}
        for label in ("iht", "iht2_zero_start", "iht2_giga_start", "iht2")}
    out["iht2_greedy_start_won"] = {str(K): float(np.mean(greedy_won[K])) for K in Ks}
    return out


def plot(res: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in SETTINGS if n in res["settings"]]
    fig, axes = plt.subplots(1, len(names), figsize=(7 * len(names), 5), squeeze=False)
    for ax, name in zip(axes[0], names):
        r = res["settings"][name]
        Ks = r["K"]
        for label, _, _ in VARIANTS:
            s = r["forward_kl"][label]
            med = [max(s[str(K)]["median"], 1e-12) for K in Ks]
            lo = [max(s[str(K)]["q25"], 1e-12) for K in Ks]
            hi = [max(s[str(K)]["q75"], 1e-12) for K in Ks]
            line, = ax.semilogy(Ks, med, "o-", label=label)
            ax.fill_between(Ks, lo, hi, color=line.get_color(), alpha=0.15)
        ax.axvline(r["D"] + 1, color="k", ls=":", lw=1)
        ax.set_title(f"IHT §5.1 {name}: D = {r['D']}, N = {r['N']} (dotted: rank D + 1)")
        ax.set_xlabel("K (coreset size)")
        ax.set_ylabel("forward KL(pi || pi_w), median and quartiles")
        ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="miniature only, 3 trials")
    args = parser.parse_args()
    names = ("miniature",) if args.quick else tuple(SETTINGS)
    trials = 3 if args.quick else args.trials
    t0 = time.perf_counter()
    res = {"config": {"trials": trials, "vectors": "exact centred L2(pi) features, float32",
                      "kl": "closed-form forward KL(pi || pi_w), float64",
                      "variants": [[label, method, options] for label, method, options in VARIANTS],
                      "jax": jax.__version__, "device": str(jax.devices()[0]), "cpu_count": os.cpu_count(),
                      "platform": platform.platform()},
           "settings": {name: run_setting(name, trials, SETTINGS[name][2]) for name in names}}
    res["config"]["wall_s"] = time.perf_counter() - t0
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stem = "iht_gaussian_quick" if args.quick else "iht_gaussian"
    with open(os.path.join(HERE, "results", f"{stem}.json"), "w") as f:
        json.dump(res, f, indent=1)
    plot(res, os.path.join(HERE, "results", f"{stem}.png"))
    for name, r in res["settings"].items():
        print(f"\n{name}: D = {r['D']}, N = {r['N']}; median forward KL")
        print(f"{'K':>5} | " + " | ".join(f"{label:>15}" for label, _, _ in VARIANTS))
        for K in r["K"]:
            print(f"{K:>5} | " + " | ".join(f"{r['forward_kl'][label][str(K)]['median']:>15.4g}"
                                            for label, _, _ in VARIANTS))


if __name__ == "__main__":
    main()
