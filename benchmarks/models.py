"""Posterior-driven coresets across a model suite that no single default can be tuned to (issue 21).

Problems (`PROBLEMS`): Gaussian location (D = 20, closed form), linear regression with unknown noise (a
NumPyro model, D = 12), logistic regression (phishing and ds1, 500 rows each, and LR §4's BINARY10 at
N = 10^5), Poisson regression (biketrips_large, airportdelays_large), Bradley-Terry (50 players, 20,000
games) and spike-and-slab regression (N = 50,000, sampled by a model-specific Gibbs kernel registered with
`cj.register_kernel`). Coreset sizes M in {100, 500, 1000} with M < N.

For each (problem, M, trial) every method builds a coreset with its defaults and is measured against the
full-data reference (two independent full-data runs: NUTS, the Gibbs kernel, or exact draws):
  - z2: the authors' metric (hot-dog.md §4.2), the mean over coordinates of the squared z-score of the
    coreset posterior mean, (mu_hat_i - mu_i)^2 / sigma_i^2, on 2 x 1000 draws of the coreset posterior
    (NUTS, or the Gibbs kernel) after 500 warm-up steps; Coreset MCMC also on its own draws (`z2_own`);
  - w1_floor: W1 to the reference draws over W1 between the two reference runs;
  - the construction's wall time (compilation included) and, for the posterior-driven methods, its
    diagnostics (iterations, hot-start length, convergence).
Spike and slab: only the continuous coordinates (beta, log sigma^2) enter the metrics, as in the papers.

Runs are appended, one JSON line each with the commit that produced it, to
benchmarks/results/tmp/models_runs.jsonl (resumable; a run already there is skipped), reference draws are
cached in benchmarks/results/tmp/, and `--report` writes benchmarks/results/models.json and .png from the
ledger. `--redo COMMIT` re-runs the runs that commit produced (the report keeps the old ones as
"<method>_previous"). `--seed-ledger` starts an empty ledger from the runs committed in results/models.json (tagged with
that file's commit), so a new session can add cells to the committed table.

    python benchmarks/models.py --problems phishing biketrips_large --sizes 100 500 --trials 3
    python benchmarks/models.py --report
    python benchmarks/models.py --quick          # a one-problem smoke run (CI)
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # this checkout's package
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.core import take_data  # noqa: E402
from coresets_jax.models import spike_and_slab as _ss  # noqa: E402
import common  # noqa: E402

TMP = os.path.join(common.RESULTS, "tmp")
LEDGER = os.path.join(TMP, "models_runs.jsonl")
SIZES = (100, 500, 1000)
HILBERT = ("giga", "iht2", "omp")
DEFAULT_METHODS = ("uniform",) + HILBERT + ("coreset_mcmc", "quasi_newton")
GIBBS = "spike_and_slab_gibbs"


# ----------------------------------------------------------------------------------------------------
# The problems. Each returns a dict: model, data, kernel (for every posterior of the problem),
# reference ("sample" or a closed form), metric coordinates, and a pi_hat for the Hilbert methods.


def _linear_regression_numpyro(key, n=20_000, p=10):
    import numpyro
    import numpyro.distributions as dist

    def regression(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 3.0).expand([X.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)

    kx, ky, kb = jax.random.split(key, 3)
    corr = 0.6 ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))      # AR(1)-correlated covariates
    X = jax.random.normal(kx, (n, p)) @ jnp.asarray(np.linalg.cholesky(corr).T, jnp.float32)
    X = jnp.concatenate([X, jnp.ones((n, 1))], axis=1)
    beta = jax.random.normal(kb, (p + 1,))
    y = X @ beta + 2.0 * jax.random.t(ky, 5.0, (n,))                         # heavier-tailed noise than assumed
    return cj.from_numpyro(regression, X, y=y)


def load_problem(name: str, data_dir: str = common.DATA_DIR) -> dict:
    key = jax.random.key(2024)
    out = {"kernel": "nuts", "coords": None, "pi_hat": None}
    if name == "gaussian_location":
        data = cj.data.synthetic_gaussian(key, 10_000, 20)
        out.update(model=cj.models.gaussian_mean(20), data=data, closed_form=True)
    elif name == "linear_regression":
        model, data = _linear_regression_numpyro(key)
        out.update(model=model, data=data)
    elif name == "logistic_binary10":
        out.update(model=cj.models.logistic_regression(), data=cj.data.synthetic_binary(key, 100_000, 10).train)
    elif name in ("phishing", "ds1", "biketrips_large", "airportdelays_large"):
        ds = cj.load_npz(os.path.join(data_dir, name + ".npz"))
        kind = cj.models.logistic_regression() if name in ("phishing", "ds1") else cj.models.poisson_regression()
        out.update(model=kind, data=(ds.X, ds.y))
    elif name == "bradley_terry":
        out.update(model=cj.models.bradley_terry(50), data=cj.data.synthetic_bradley_terry(key, 20_000, 50).train)
    elif name == "spike_and_slab":
        if GIBBS not in cj.inference.KERNELS:
            cj.register_kernel(GIBBS, _ss.gibbs_kernel(10))
        data = cj.data.synthetic_sparse_regression(key, 50_000).train
        out.update(model=_ss.spike_and_slab(10), data=data, kernel=GIBBS,
                   coords=np.r_[np.arange(10), 20])
    else:
        raise KeyError(f"unknown problem {name!r}; expected one of {PROBLEMS}")
    return out


PROBLEMS = ("gaussian_location", "linear_regression", "phishing", "ds1", "logistic_binary10",
            "biketrips_large", "airportdelays_large", "bradley_terry", "spike_and_slab")


def n_rows(problem) -> int:
    return int(jax.tree_util.tree_leaves(problem["data"])[0].shape[0])


# ----------------------------------------------------------------------------------------------------
# Sampling and the reference.


def posterior_draws(problem, key, weights=None, num_samples=1000, num_warmup=500, chains=2):
    """Draws (chains * num_samples, D) of pi_w (w = a Coreset, or None for the full data)."""
    model, data = problem["model"], problem["data"]
    init = None
    if problem["kernel"] == GIBBS:
        init = model.init_params(data)
    post = cj.sample(model, data, key, weights=weights, method=problem["kernel"], num_samples=num_samples,
                     num_warmup=num_warmup, num_chains=chains, init=init, warn=False)
    return np.asarray(post.samples, np.float64).reshape(-1, post.samples.shape[-1])


def reference(name: str, problem) -> dict:
    """Two independent full-data runs (cached); their W1 is the noise floor."""
    os.makedirs(TMP, exist_ok=True)
    path = os.path.join(TMP, f"models_ref_{name}.npz")
    if os.path.exists(path):
        z = np.load(path)
        a, b, seconds = z["a"], z["b"], float(z["seconds"])
    elif problem.get("closed_form"):
        mean, cov = problem["model"].posterior(problem["data"])
        chol = np.linalg.cholesky(np.asarray(cov, np.float64))
        rng = np.random.default_rng(0)
        a, b = (np.asarray(mean) + rng.standard_normal((4000, len(mean))) @ chol.T for _ in range(2))
        seconds = 0.0
        np.savez(path, a=a, b=b, seconds=seconds, exact_mean=np.asarray(mean), exact_sd=np.sqrt(np.diag(cov)))
    else:
        start = time.perf_counter()
        a = posterior_draws(problem, jax.random.key(100), num_samples=2000, num_warmup=1000)
        seconds = time.perf_counter() - start
        b = posterior_draws(problem, jax.random.key(101), num_samples=2000, num_warmup=1000)
        np.savez(path, a=a, b=b, seconds=seconds)
    coords = problem["coords"] if problem["coords"] is not None else np.arange(a.shape[1])
    a, b = a[:, coords], b[:, coords]
    z = np.load(path)
    if "exact_mean" in z:
        mean, sd = z["exact_mean"][coords], z["exact_sd"][coords]
    else:
        both = np.concatenate([a, b])
        mean, sd = both.mean(0), both.std(0)
    floor = float(cj.metrics.wasserstein1(a[:2000], b[:2000]))
    cov = np.cov(np.concatenate([a, b]), rowvar=False).reshape(a.shape[1], a.shape[1])
    return {"a": a, "mean": mean, "sd": sd, "cov": cov, "floor": floor, "coords": coords, "seconds": seconds,
            "z2_floor": float(np.mean(((b.mean(0) - mean) / sd) ** 2)),
            "kl2_floor": kl2(b, {"mean": a.mean(0), "cov": np.cov(a, rowvar=False).reshape(a.shape[1], a.shape[1]),
                                 "coords": np.arange(a.shape[1])})}


def kl2(draws, ref) -> float:
    """The two-moment KL of coreset-mcmc.md §4.3: KL(N(mu_hat, S_hat) || N(mu, S)), mu_hat, S_hat from the draws
    and mu, S from the reference (log det S_hat -> log 1e-20 when S_hat is not positive definite)."""
    x = draws[:, ref["coords"]]
    d = x.shape[1]
    mu, sigma = x.mean(0), np.cov(x, rowvar=False).reshape(d, d)
    inv = np.linalg.inv(ref["cov"])
    logdet = np.linalg.slogdet(ref["cov"])[1]
    sign, logdet_hat = np.linalg.slogdet(sigma)
    diff = ref["mean"] - mu
    return float(0.5 * (logdet - (logdet_hat if sign > 0 else np.log(1e-20)) - d + np.trace(inv @ sigma)
                        + diff @ inv @ diff))


def z2(draws, ref) -> float:
    """hot-dog.md §4.2: mean_i (mu_hat_i - mu_i)^2 / sigma_i^2."""
    return float(np.mean(((draws[:, ref["coords"]].mean(0) - ref["mean"]) / ref["sd"]) ** 2))


def w1_floor(draws, ref) -> float:
    return float(cj.metrics.wasserstein1(ref["a"][:2000], draws[:2000, ref["coords"]]) / ref["floor"])


# ----------------------------------------------------------------------------------------------------
# Methods.


def pi_hat_for(problem, key):
    """What the Hilbert methods project on: the Laplace default, or for the spike and slab (discrete
    indicators, no Laplace fit) Gibbs draws on a uniform 2% subsample weighted up (HC §5's "MCMC on a small
    random subsample")."""
    if problem["kernel"] != GIBBS:
        return None
    if problem.get("_pi_hat") is None:
        n = n_rows(problem)
        m = n // 50
        idx = jax.random.choice(key, n, (m,), replace=False)
        sub = dict(problem, data=take_data(problem["data"], idx))
        cs = cj.Coreset(jnp.arange(m, dtype=jnp.int32), jnp.full(m, n / m, jnp.float32), {}, "uniform")
        problem["_pi_hat"] = posterior_draws(sub, key, weights=cs, num_samples=250, num_warmup=250)
    return problem["_pi_hat"]


def build(problem, method: str, size: int, key, options: dict):
    model, data = problem["model"], problem["data"]
    opts = dict(options)
    if method in cj.POSTERIOR_METHODS and problem["kernel"] == GIBBS:
        opts.setdefault("kernel", GIBBS)
    pi_hat = pi_hat_for(problem, jax.random.key(7))
    if pi_hat is not None:
        opts["pi_hat"] = pi_hat
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cj.coreset(model, data, size, method, key=key, **opts)


# "<start>+refine[_qn]": the start's coreset (same key as its own run), then cj.refine with Coreset MCMC or
# quasi-Newton; the construction time is the sum of both.
# "_unbudgeted": no wall-clock budget (the method's own caps and plateau test), to measure what the default
# budget (refine.BUDGET_FACTOR x the start's time) costs in quality.
REFINED = {"omp+refine": ("omp", "coreset_mcmc", {}), "omp+refine_qn": ("omp", "quasi_newton", {}),
           "iht2+refine": ("iht2", "coreset_mcmc", {}),
           "omp+refine_unbudgeted": ("omp", "coreset_mcmc", {"time_budget": float("inf")}),
           "omp+refine_qn_unbudgeted": ("omp", "quasi_newton", {"time_budget": float("inf")})}


def refined(problem, method: str, size: int, key, options: dict):
    """The start's coreset, then `cj.refine`; returns (coreset, extra row fields)."""
    start_method, refine_method, preset = REFINED[method]
    t0 = time.perf_counter()
    start = build(problem, start_method, size, key, {})
    jax.block_until_ready(start.weights)
    start_s = time.perf_counter() - t0
    opts = dict(preset, **options)
    if problem["kernel"] == GIBBS:
        opts.setdefault("kernel", GIBBS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cj.refine(problem["model"], problem["data"], start, jax.random.fold_in(key, 7), method=refine_method,
                        **opts)
    info = out.info
    extra = {"start_s": start_s, "refine_s": float(info["time_s"]), "certify_s": float(info["certify_s"]),
             "budget_s": float(info["budget_s"]), "kept": info["kept"],
             "refine_iterations": int(np.asarray(info.get("iterations", info.get("steps", 0)))),
             "refine_stopped_by": int(np.asarray(info.get("stopped_by", -1))),
             "cert_kl_start": float(info["start_certificate"].kl), "cert_kl_trained": float(info["trained_certificate"].kl),
             "verdict_start": info["start_certificate"].verdict, "verdict_trained": info["trained_certificate"].verdict}
    trained = cj.Coreset(jnp.asarray(info["trained_indices"]), jnp.asarray(info["trained_weights"]), {}, "trained")
    return out, trained, extra


def run_one(name, problem, ref, method, size, trial, options, label) -> dict:
    key = jax.random.key(1000 * trial + size)
    start = time.perf_counter()
    trained, extra = None, {}
    if method in REFINED:
        cs, trained, extra = refined(problem, method, size, key, options)
    else:
        cs = build(problem, method, size, key, options)
    jax.block_until_ready(cs.weights)
    seconds = time.perf_counter() - start
    row = {"problem": name, "method": label, "M": size, "trial": trial, "construct_s": seconds,
           "points": int(cs.num_points), **extra}
    draws = posterior_draws(problem, jax.random.key(trial + 17), weights=cs)
    row.update(z2=z2(draws, ref), w1_floor=w1_floor(draws, ref), kl2=kl2(draws, ref))
    if trained is not None:  # the trained weights' own quality, whichever refine kept
        if extra["kept"] == "trained":
            row["z2_trained"] = row["z2"]
        else:
            row["z2_trained"] = z2(posterior_draws(problem, jax.random.key(trial + 19), weights=trained), ref)
    if problem["kernel"] != GIBBS:  # the one-pass certificate's KL(pi_w || pi) estimate from the same draws
        try:
            cert = cj.certify(problem["model"], problem["data"], cs, draws)
            row.update(cert_kl=float(cert.kl), khat=float(cert.khat))
        except ValueError as err:
            row["cert_error"] = str(err)[:200]
    info = cs.info
    if "samples" in info and method in ("coreset_mcmc", "quasi_newton"):
        own = np.asarray(info["samples"], np.float64).reshape(-1, draws.shape[1])
        row["z2_own"] = z2(own, ref)
    for k in ("iterations", "hot_start_steps", "hot_start_converged", "converged", "plateau", "drift_kl",
              "effective_dimension", "best_step", "kl_estimate", "start_kl_estimate", "fell_back", "confirmed",
              "stopped_by", "steps", "fallback", "chosen_step"):
        if k in info:
            row[k] = np.asarray(info[k]).item()
    return row


# ----------------------------------------------------------------------------------------------------
# Ledger and report.


def ledger() -> list:
    if not os.path.exists(LEDGER):
        return []
    with open(LEDGER) as f:
        return [json.loads(line) for line in f if line.strip()]


def append(row: dict) -> None:
    os.makedirs(TMP, exist_ok=True)
    with open(LEDGER, "a") as f:
        f.write(json.dumps(common.jsonable(row)) + "\n")


def seed_ledger(path: str) -> None:
    """Start an empty ledger from a committed report's runs, each tagged with that report's commit."""
    if ledger():
        raise SystemExit(f"--seed-ledger: {LEDGER} already holds runs; move it away first")
    with open(path) as f:
        committed = json.load(f)
    commit = committed["environment"]["git_commit"]
    for row in committed["runs"]:
        append({**row, "commit": row.get("commit", commit)})
    print(f"seeded {LEDGER} with {len(committed['runs'])} runs from {path}", flush=True)


def run_key(row: dict) -> tuple:
    return row["problem"], row["method"], row["M"], row["trial"]


def supersede(rows: list) -> list:
    """The latest run of each (problem, method, M, trial); an earlier run of the same key (older code, see
    `--redo`) stays in the report as method "<method>_previous", so old and new code show side by side."""
    latest = {run_key(r): r for r in rows}
    return list(latest.values()) + [{**r, "method": r["method"] + "_previous"} for r in rows
                                    if latest[run_key(r)] is not r]


def report(rows: list, out_dir: str, stem: str = "models") -> dict:
    """Medians per (problem, M, method), the best Hilbert method per cell, and the issue's targets."""
    rows = supersede(rows)
    cells = {}
    for r in rows:
        cells.setdefault((r["problem"], r["M"]), {}).setdefault(r["method"], []).append(r)
    table = []
    for (problem, size), by_method in sorted(cells.items()):
        med = {m: float(np.median([r["z2"] for r in rs])) for m, rs in by_method.items()}
        hilbert = {m: v for m, v in med.items() if m in HILBERT}
        best = min(hilbert, key=hilbert.get) if hilbert else None
        entry = {"problem": problem, "M": size, "best_hilbert": best,
                 "best_hilbert_z2": hilbert.get(best) if best else None, "median_z2": med,
                 "median_w1_floor": {m: float(np.median([r["w1_floor"] for r in rs])) for m, rs in by_method.items()},
                 "median_construct_s": {m: float(np.median([r["construct_s"] for r in rs])) for m, rs in by_method.items()},
                 "trials": {m: len(rs) for m, rs in by_method.items()}}
        for m in med:
            if m in cj.POSTERIOR_METHODS or m in REFINED or m.startswith(("coreset_mcmc", "quasi_newton")):
                ratio = med[m] / entry["best_hilbert_z2"] if best else None
                entry.setdefault("targets", {})[m] = {
                    "within_2x_best_hilbert_or_under_0.01": bool(best and (ratio <= 2 or med[m] < 0.01)),
                    "ratio_to_best_hilbert": ratio,
                    "never_worse_than_uniform": bool("uniform" in by_method and all(
                        r["z2"] <= u["z2"] for r in by_method[m] for u in by_method["uniform"]
                        if u["trial"] == r["trial"]))}
        table.append(entry)
    summary = {}
    for m in sorted({m for e in table for m in e.get("targets", {})}):
        cells = [e for e in table if m in e.get("targets", {})]
        large = [e for e in cells if e["M"] >= 500 and e["best_hilbert"]]
        summary[m] = {
            "cells": len(cells),
            "within_2x_or_under_0.01": sum(e["targets"][m]["within_2x_best_hilbert_or_under_0.01"] for e in cells),
            "never_worse_than_uniform": sum(e["targets"][m]["never_worse_than_uniform"] for e in cells),
            "beats_best_hilbert_at_M_ge_500": sum(e["median_z2"][m] < e["best_hilbert_z2"] for e in large),
            "cells_at_M_ge_500": len(large),
            "misses": [f"{e['problem']} M={e['M']}" for e in cells
                       if not e["targets"][m]["within_2x_best_hilbert_or_under_0.01"]]}
        if m in REFINED:
            runs = [r for r in rows if r["method"] == m]
            summary[m]["kept_trained"] = sum(r.get("kept") == "trained" for r in runs)
            summary[m]["runs"] = len(runs)
            summary[m]["trained_better_by_z2"] = sum(r["z2_trained"] < r["z2"] for r in runs if "z2_trained" in r
                                                     and r.get("kept") == "start")
            summary[m]["median_refine_over_start_time"] = float(np.median(
                [(r["refine_s"] + r["certify_s"]) / max(r["start_s"], 1e-9) for r in runs])) if runs else None
        if m.startswith("quasi_newton"):
            runs = [r for r in rows if r["method"] == m and "kl_estimate" in r]
            # Both estimates are Monte Carlo (a fresh round at the returned weights against the start's
            # round): "worse" means beyond 0.05 nats + 20%. A run that returned its start (best_step 0) is
            # its start, whatever a second round of the estimate reads, so only moved runs count.
            moved = [r for r in runs if r.get("best_step", 1) != 0]
            summary[m]["runs_whose_kl_estimate_exceeds_the_start"] = sum(
                r["kl_estimate"] > 1.2 * r["start_kl_estimate"] + 0.05 for r in moved)
            summary[m]["runs_that_moved_from_the_start"] = len(moved)
            summary[m]["runs"] = len(runs)
    counts = sorted({n for e in table for n in e["trials"].values()}) or [0]
    sizes = sorted({e["M"] for e in table})
    trials = str(counts[0]) if counts[0] == counts[-1] else f"{counts[0]}-{counts[-1]}"
    reductions = {
        "trials": f"{trials} per cell{' at M = ' + str(sizes[0]) if len(sizes) == 1 else ''} (the authors run 10)",
        "metric_draws": "2 x 1000 NUTS (or Gibbs) draws after 500 warm-up steps per coreset; reference 2 x 2000",
        "problems_missing": sorted(set(PROBLEMS) - {e["problem"] for e in table}),
        "measured_elsewhere": ["Hot DoG against Adam over learning rates (hot-dog.md Fig. 1): investigations/hot_dog_adam.py",
                               "SGLD / SGHMC baselines at equal likelihood evaluations and wall time: "
                               "sgmcmc_baselines.py"]}
    result = {"environment": common.environment(), "summary": summary, "reductions": reductions,
              "table": table, "runs": rows}
    common.write_json(result, out_dir, stem)
    plot(table, out_dir, stem)
    return result


def markdown(table: list) -> str:
    """The README table: median z2 per cell for uniform, the best Hilbert method and the refinements."""
    def fmt(x):
        return "–" if x is None else (f"{x:.2g}" if x < 0.01 else f"{x:.3g}" if x < 1000 else f"{x:,.0f}")

    lines = ["| problem | M | uniform | best Hilbert | coreset_mcmc | quasi_newton |", "|---|---|---|---|---|---|"]
    for e in table:
        med, trials = e["median_z2"], e["trials"]
        if not any(m in med for m in ("coreset_mcmc", "quasi_newton")):
            continue
        cell = lambda m: fmt(med.get(m)) + (f" ({trials[m]})" if m in trials and trials[m] < 3 else "")  # noqa: E731
        lines.append(f"| {e['problem']} | {e['M']} | {cell('uniform')} | {e['best_hilbert']} "
                     f"{fmt(e['best_hilbert_z2'])} | {cell('coreset_mcmc')} | {cell('quasi_newton')} |")
    return "\n".join(lines)


def plot(table: list, out_dir: str, stem: str) -> None:
    problems = sorted({e["problem"] for e in table})
    if not problems:
        return
    fig, axes = common.figure(1, len(problems), size=(3.2, 3.0))
    methods = sorted({m for e in table for m in e["median_z2"]})
    colours = {m: f"C{i}" for i, m in enumerate(methods)}
    for ax, problem in zip(axes[0], problems):
        entries = [e for e in table if e["problem"] == problem]
        for m in methods:
            pts = [(e["M"], e["median_z2"][m]) for e in entries if m in e["median_z2"]]
            if pts:
                xs, ys = zip(*sorted(pts))
                ax.plot(xs, ys, "o-", color=colours[m], label=m, ms=3)
        ax.set_xscale("log"), ax.set_yscale("log"), ax.set_title(problem, fontsize=9)
        ax.set_xlabel("M")
    axes[0][0].set_ylabel("median squared z-score")
    axes[0][-1].legend(fontsize=6)
    common.save_figure(fig, out_dir, stem)


# ----------------------------------------------------------------------------------------------------


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS))
        p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
        p.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS))
        p.add_argument("--options", default="{}", help="JSON dict of options for the posterior methods")
        p.add_argument("--label", default=None, help="method label in the ledger (default: the method)")
        p.add_argument("--label-suffix", default="", help="appended to each method's label (e.g. a code version)")
        p.add_argument("--report", action="store_true", help="only aggregate the ledger")
        p.add_argument("--redo", nargs="+", default=[], metavar="COMMIT",
                       help="re-run the runs of these commits; the new runs supersede them in the report")
        p.add_argument("--seed-ledger", action="store_true",
                       help="start an empty ledger from the runs in results/models.json")
        p.add_argument("--markdown", action="store_true", help="with --report: print the README table")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    trials = args.trials or 3
    if args.quick:
        rows = []
        name = "phishing" if common.data_path("phishing.npz") else "gaussian_location"
        problem = load_problem(name, args.data_dir)
        ref = reference(name, problem)
        for method, opts in (("uniform", {}), ("coreset_mcmc", {"num_iters": 300, "num_draws": 100}),
                             ("quasi_newton", {"num_iters": 3})):
            rows.append(run_one(name, problem, ref, method, 50, 0, opts, method))
        return report(rows, args.out, "models_quick")
    if args.seed_ledger:
        seed_ledger(os.path.join(common.RESULTS, "models.json"))
    if not args.report:
        done = {run_key(r) for r in ledger() if r.get("commit") not in args.redo}
        options = json.loads(args.options)
        commit = common.environment()["git_commit"]  # each row says which code produced it
        for name in args.problems:
            problem = load_problem(name, args.data_dir)
            ref = reference(name, problem)
            print(f"== {name}: N = {n_rows(problem)}; reference {ref['seconds']:.1f} s, z2 floor "
                  f"{ref['z2_floor']:.2g}", flush=True)
            for size in args.sizes:
                if size >= n_rows(problem):
                    continue
                for trial in range(trials):
                    for method in args.methods:
                        label = args.label or method + args.label_suffix
                        if (name, label, size, trial) in done:
                            continue
                        opts = options if method in cj.POSTERIOR_METHODS else {}
                        try:
                            row = run_one(name, problem, ref, method, size, trial, opts, label)
                        except Exception as err:  # recorded, so one failure does not hide the rest
                            row = {"problem": name, "method": label, "M": size, "trial": trial,
                                   "error": f"{type(err).__name__}: {err}"[:500]}
                        append({**row, "commit": commit})
                        print("  " + json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                                                 for k, v in row.items()}), flush=True)
    result = report([r for r in ledger() if "error" not in r], args.out)
    if args.markdown:
        print(markdown(result["table"]))
    return result


if __name__ == "__main__":
    main()
