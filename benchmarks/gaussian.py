"""HC §6: Gaussian mean inference with closed-form KL (Figs. 2e and 2f), batched trials.

Model (HC Eq. 6.1): mu ~ N(0, I_2), y_n | mu ~ N(mu, I_2), n = 1..N. Each trial draws mu and the data,
builds a coreset and measures KL(pi || pi_w) exactly (Eq. 6.6 with the posteriors of Eqs. 6.2 and 6.4).

- Fig. 2e: KL against M for Rand (uniform subsampling), Unif (sensitivity coreset, Eq. 6.3), IS (HC
  Algorithm 1), FW (HC Algorithm 2), GIGA and A-IHT II, all Hilbert methods on the exact Fisher vectors of
  Eq. 6.5 (pi_hat = pi).
- Fig. 2f: KL against the projection dimension J at M = 50: Fisher features (Eq. 5.7) from J draws of
  pi, against the exact-norm result.

Every trial is one pure function of its PRNG key (data -> vectors -> solver -> KL), so the trials of one
(method, M) run as a single `jit(vmap(trial))` call over keys (and hence over datasets). The script also
times that batched call against a Python loop of single trials. Computation in float64 (the KL of a good
coreset is far below float32 resolution).

    python benchmarks/gaussian.py [--trials 1000] [--quick]

writes benchmarks/results/gaussian.{json,png} (gaussian_quick.* with --quick).
"""

from __future__ import annotations

import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402

import coresets_jax as cj  # noqa: E402

from coresets_jax.metrics import gaussian_kl  # noqa: E402
from coresets_jax.models import gaussian_mean, gaussian_mean_fisher_vectors, gaussian_mean_posterior  # noqa: E402
from coresets_jax.sensitivity import gaussian_mean_sensitivity_core, sensitivity_sample_core  # noqa: E402

DIM = 2
METHODS = (("Rand", "uniform"), ("Unif", "unif"), ("IS", "importance"), ("FW", "frank_wolfe"),
           ("GIGA", "giga"), ("A-IHT II", "iht2"))
PROJECTED = (("IS", "importance"), ("FW", "frank_wolfe"), ("GIGA", "giga"), ("A-IHT II", "iht2"))


def fisher_features(key, y, J):
    """HC Eq. 5.7 with pi_hat = pi: J posterior draws, one random coordinate each (the package's core)."""
    k_theta, k_coord = jax.random.split(key)
    mean, cov = gaussian_mean_posterior(y)
    thetas = mean + jnp.sqrt(cov[0, 0]) * jax.random.normal(k_theta, (J, DIM), y.dtype)
    # project_fn draws d_j ~ Unif{0..D-1} from k_coord
    return cj.project_fn(gaussian_mean(DIM), "fisher", dtype=y.dtype, chunk_size=y.shape[0])(k_coord, y, thetas)


def isotropic_kl(y, w):
    """HC Eq. 6.6 for the isotropic posteriors of Eqs. 6.2 and 6.4 (cov = I / (1 + sum w)); equals
    `cj.metrics.gaussian_kl` (checked once per run in `kl_formula_check`) without a Cholesky to compile."""
    s_full, s_w = 1.0 / (1.0 + y.shape[0]), 1.0 / (1.0 + jnp.sum(w))
    diff = (w @ y) * s_w - jnp.sum(y, 0) * s_full
    d = y.shape[1]
    return 0.5 * (d * s_full / s_w + diff @ diff / s_w - d + d * jnp.log(s_w / s_full))


def make_trial(method: str, M: int, N: int, J=None):
    """key -> KL(pi || pi_w) for one freshly drawn dataset (pure; jit and vmap it)."""
    solve = None if method == "unif" else common.solver_fn(method, M)

    def trial(key):
        k_mu, k_y, k_proj, k_solve = jax.random.split(key, 4)
        mu = jax.random.normal(k_mu, (DIM,), jnp.float64)
        y = mu + jax.random.normal(k_y, (N, DIM), jnp.float64)
        if method == "unif":
            indices, weights = sensitivity_sample_core(k_solve, gaussian_mean_sensitivity_core(y), M)
        else:
            V = gaussian_mean_fisher_vectors(y) if J is None else fisher_features(k_proj, y, J)
            indices, weights = solve(V, k_solve)
        w = common.dense(indices, weights, N)
        return isotropic_kl(y, w), jnp.sum(w > 0)

    return trial


@functools.lru_cache(maxsize=None)
def batched(method, M, N, J=None):
    return jax.jit(jax.vmap(make_trial(method, M, N, J)))


def run(trials: int, N: int, Ms, Js, M_fixed: int, speed_batch: int, methods=None, part_J=True,
        projected=None, speed_method="FW") -> dict:
    keys = jax.random.split(jax.random.key(2019), trials)
    res = {"N": N, "D": DIM, "trials": trials, "M": list(Ms), "J": list(Js), "M_for_J": M_fixed,
           "kl_vs_M": {}, "points_vs_M": {}, "kl_vs_J": {}, "kl_exact_at_M_for_J": {}, "time_s": {}}
    for label, method in METHODS if methods is None else [m for m in METHODS if m[0] in methods]:
        t0 = time.perf_counter()
        res["kl_vs_M"][label], res["points_vs_M"][label] = {}, {}
        for M in Ms:
            kl, pts = common.block(batched(method, M, N)(keys))
            res["kl_vs_M"][label][str(M)] = common.summary(np.asarray(kl))
            res["points_vs_M"][label][str(M)] = float(np.median(np.asarray(pts)))
        res["time_s"][label] = time.perf_counter() - t0
        print(f"  {label}: KL at M = {Ms[-1]}: {res['kl_vs_M'][label][str(Ms[-1])]['median']:.3g} "
              f"({res['time_s'][label]:.1f} s)", flush=True)
    if not part_J:
        return res
    for label, method in PROJECTED if projected is None else [m for m in PROJECTED if m[0] in projected]:
        kl, _ = batched(method, M_fixed, N)(keys)
        res["kl_exact_at_M_for_J"][label] = common.summary(np.asarray(kl))
        res["kl_vs_J"][label] = {str(J): common.summary(np.asarray(batched(method, M_fixed, N, J)(keys)[0]))
                                 for J in Js}
    y = jax.random.normal(jax.random.key(3), (N, DIM), jnp.float64)
    w = jax.random.exponential(jax.random.key(4), (N,), jnp.float64)
    res["kl_formula_check"] = {"isotropic": float(isotropic_kl(y, w)), "cj.metrics.gaussian_kl": float(
        gaussian_kl(*gaussian_mean_posterior(y), *gaussian_mean_posterior(y, w)))}
    # FW linear convergence (Theorem 4.4 bound is 1/sqrt(M); Fig. 2e shows geometric decay): fit
    # log KL = a + b M on the median curve.
    res["fw_log_kl_slope_per_point"] = fw_slope(res)  # NaN (null) without FW or with one M
    # Batched trials against a Python loop of trials, same work, both compiled.
    sk = jax.random.split(jax.random.key(7), speed_batch)
    res["batched_speedup"] = {}
    speed = (("FW", "frank_wolfe"), ("A-IHT II", "iht2"), ("Rand", "uniform"))
    for label, method in [m for m in speed if m[0] == speed_method]:
        sp = common.batched_speedup(lambda k, m=method: make_trial(m, M_fixed, N)(k), sk)
        res["batched_speedup"][f"{label} M={M_fixed}"] = {k: v for k, v in sp.items() if k != "output"}
        print(f"  batched vs loop, {label}: {sp['speedup']:.1f}x ({sp['loop_s']:.3f} s vs "
              f"{sp['batched_s']:.3f} s for {speed_batch} trials)", flush=True)
    return res


def fw_slope(res: dict) -> float:
    Ms = res["M"]
    if "FW" not in res["kl_vs_M"]:
        return float("nan")
    fw = np.array([res["kl_vs_M"]["FW"][str(M)]["median"] for M in Ms])
    ok = fw > 1e-14
    return float(np.polyfit(np.asarray(Ms, float)[ok], np.log(fw[ok]), 1)[0]) if ok.sum() >= 2 else float("nan")


def merge(paths, out_dir, stem):
    """Join result files of parallel processes (method subsets, the J part) into one result and figure."""
    import json

    parts = [json.load(open(p)) for p in paths]
    res = dict(parts[0])
    for key in ("kl_vs_M", "points_vs_M", "time_s", "kl_vs_J", "kl_exact_at_M_for_J", "batched_speedup",
                "kl_formula_check"):
        res[key] = {k: v for part in parts for k, v in (part.get(key) or {}).items()}
    res["fw_log_kl_slope_per_point"] = fw_slope(res)
    res["merged_from"] = [os.path.basename(p) for p in paths]
    res["wall_s"] = max(part["wall_s"] for part in parts)
    common.write_json(res, out_dir, stem)
    plot(res, out_dir, stem)
    return res


def plot(res: dict, path_dir: str, stem: str) -> None:
    fig, axes = common.figure(1, 2)
    ax = axes[0, 0]
    for label, _ in METHODS:
        if label not in res["kl_vs_M"]:
            continue
        s = res["kl_vs_M"][label]
        Ms = res["M"]
        med = [max(s[str(M)]["median"], 1e-16) for M in Ms]
        lo = [max(s[str(M)]["q25"], 1e-16) for M in Ms]
        hi = [max(s[str(M)]["q75"], 1e-16) for M in Ms]
        line, = ax.semilogy(Ms, med, "o-", ms=3, label=label)
        ax.fill_between(Ms, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("M (coreset size / iterations)")
    ax.set_ylabel("KL(pi || pi_w), median and quartiles")
    ax.set_title(f"HC Fig. 2e: Gaussian, N = {res['N']}, {res['trials']} trials")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    ax = axes[0, 1]
    if not res["kl_vs_J"]:
        ax.axis("off")
    for label, _ in PROJECTED:
        if label not in res["kl_vs_J"]:
            continue
        Js = res["J"]
        line, = ax.loglog(Js, [res["kl_vs_J"][label][str(J)]["median"] for J in Js], "o-", ms=3,
                          label=f"{label} (projected)")
        ax.axhline(res["kl_exact_at_M_for_J"][label]["median"], color=line.get_color(), ls="--", lw=1)
    ax.set_xlabel("J (projection dimension)")
    ax.set_ylabel("KL(pi || pi_w), median")
    ax.set_title(f"HC Fig. 2f: M = {res['M_for_J']} (dashed: exact norm)")
    if res["kl_vs_J"]:
        ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    common.save_figure(fig, path_dir, stem)


def _extra(p):
    p.add_argument("--methods", default=None, help="comma-separated labels for the M sweep (default all)")
    p.add_argument("--no-J", action="store_true", help="skip the J sweep and the speed-up")
    p.add_argument("--stem", default=None)
    p.add_argument("--projected", default=None, help="comma-separated labels for the J sweep (default all)")
    p.add_argument("--J", default=None, help="comma-separated J values for the J sweep")
    p.add_argument("--merge", nargs="+", default=None, help="merge result JSONs of parallel runs and plot")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    if args.merge:
        return merge(args.merge, args.out, args.stem or "gaussian")
    speed_method = "FW"
    if args.quick:
        # CI smoke run (seconds): XLA compilation of each (method, M) dominates, so Rand and GIGA at M = 5
        # only, no J sweep (the projection core runs in the regression quick run) and no batched timing.
        trials, N, Ms, Js, speed_batch = args.trials or 4, 100, (5,), (20,), 2
        args.methods = args.methods or "Rand,GIGA"
        args.projected = args.projected or ""  # no projected method: the J sweep is empty
        speed_method = None
    else:
        # 300 trials (paper: 1000) and a short M grid: on the shared 2-core CPU each (method, M) compiles
        # separately and compilation dominates.
        trials, N, speed_batch = args.trials or 300, 1000, 64
        Ms = (1, 2, 5, 10, 20, 50, 100)
        Js = (10, 100, 1000)
    t0 = time.perf_counter()
    with jax.enable_x64(True):
        methods = None if args.methods is None else args.methods.split(",")
        projected = None if args.projected is None else args.projected.split(",")
        if args.J:
            Js = tuple(int(j) for j in args.J.split(","))
        res = run(trials, N, Ms, Js, min(50, Ms[-1]), speed_batch, methods, not args.no_J, projected,
                  speed_method)
    res = {"experiment": "HC §6, Figs. 2e and 2f", "quick": bool(args.quick),
           "paper_trials": 1000, "environment": common.environment(), **res,
           "wall_s": time.perf_counter() - t0}
    stem = common.stem(args.stem or "gaussian", args.quick)
    common.write_json(res, args.out, stem)
    plot(res, args.out, stem)
    return res


if __name__ == "__main__":
    main()
