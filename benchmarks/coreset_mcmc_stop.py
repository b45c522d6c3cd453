"""Coreset MCMC as published, over its whole budget: the answer at every checkpoint, to choose the stopping
rule (coreset_mcmc.py step 5: it may only stop early, and must not change the answer).

For each (problem, M, trial), one run of `method="coreset_mcmc"` with the authors' settings and the authors'
budget (200,000 iterations, `stop_tol=0`: no stopping rule) records the returned iterate at the checkpoints
500 x 2^k (`info["checkpoint_weights"]`) with the rule's drift statistics there (`info["checkpoint_drifts"]`:
the KL between the posteriors of the iterate and of the last and second-to-last checkpoint's iterates, on
the recent chain states). Each recorded iterate, and the final one, is then scored against the full-data
reference (benchmarks/models.py's problems and cached references):
  - z2, the authors' metric (hot-dog.md §4.2), on 2 x 500 NUTS draws of its posterior;
  - the certificate's KL(pi_w || pi) estimate (`cj.certify`, float64) from the same draws;
  - for Gaussian location, the exact KL(pi_w || pi).
The report then replays candidate rules on the recorded drifts: where each would have stopped, the
iterations it saved, and its answer against the full budget's (ratio of z2 and of KL).

    python benchmarks/coreset_mcmc_stop.py --problems gaussian_location phishing --sizes 100 --trials 2
    python benchmarks/coreset_mcmc_stop.py --report
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

LEDGER = os.path.join(models.TMP, "coreset_mcmc_stop_runs.jsonl")
PROBLEMS = ("gaussian_location", "phishing", "biketrips_large", "bradley_terry", "logistic_binary10")
SIZES = (100, 500)


def score(problem, ref, indices, weights, key) -> dict:
    """z2 and the certificate's KL of the coreset (indices, weights); the exact KL where there is one."""
    cs = cj.Coreset(np.asarray(indices), np.asarray(weights), {}, "coreset_mcmc")
    draws = models.posterior_draws(problem, key, weights=cs, num_samples=500, num_warmup=300)
    out = {"z2": models.z2(draws, ref)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cert = cj.certify(problem["model"], problem["data"], cs, draws)
    out.update(cert_kl=float(cert.kl), khat=float(cert.khat))
    if problem.get("closed_form"):
        n = models.n_rows(problem)
        mean, cov = problem["model"].posterior(problem["data"])
        mean_w, cov_w = problem["model"].posterior(problem["data"], cs.dense(n))
        out["exact_kl"] = float(cj.metrics.gaussian_kl(mean_w, cov_w, mean, cov))
    return out


def run_one(name, problem, ref, size, trial, options) -> dict:
    key = jax.random.key(1000 * trial + size)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cs = cj.coreset(problem["model"], problem["data"], size, "coreset_mcmc", key=key, stop_tol=0.0,
                        num_draws=10, **options)
    jax.block_until_ready(cs.weights)
    seconds = time.perf_counter() - start
    info = cs.info
    taken = int(info["checkpoints"])
    weights = np.asarray(info["checkpoint_weights"])[:taken]
    drifts = np.asarray(info["checkpoint_drifts"])[:taken]
    first = 500
    row = {"problem": name, "M": size, "trial": trial, "construct_s": seconds,
           "iterations": int(info["iterations"]), "hot_start_steps": int(info["hot_start_steps"]),
           "checkpoints": []}
    for k in range(taken):
        entry = {"step": first * 2 ** k, "drift": float(drifts[k, 0]), "drift2": float(drifts[k, 1])}
        if first * 2 ** k >= 1000:  # the first checkpoints are scored too sparsely to matter
            entry.update(score(problem, ref, cs.indices, weights[k], jax.random.key(trial + 31 + k)))
        row["checkpoints"].append(entry)
    row["final"] = score(problem, ref, cs.indices, cs.weights, jax.random.key(trial + 17))
    row["final"]["step"] = row["iterations"]
    return row


# ----------------------------------------------------------------------------------------------------
# Candidate rules replayed on the recorded drifts.


def rule_drift(tol: float, checks: int):
    """Stop at the first checkpoint where the drift to the previous one was <= tol `checks` times in a row."""
    def where(cps):
        run = 0
        for i, c in enumerate(cps):
            run = run + 1 if c["drift"] <= tol else 0
            if run >= checks:
                return i
        return None
    return where


def rule_stationary(ratio: float):
    """Stop once the iterate no longer travels: its drift to the second-to-last checkpoint's iterate is at most
    `ratio` times its drift to the last one (a steady walk gives ~4x, noise around a fixed point ~1x)."""
    def where(cps):
        for i, c in enumerate(cps):
            if math.isfinite(c["drift2"]) and c["drift2"] <= ratio * c["drift"]:
                return i
        return None
    return where


RULES = {"drift<=0.01 x2": rule_drift(0.01, 2), "drift<=0.05 x2": rule_drift(0.05, 2),
         "drift<=0.1 x2": rule_drift(0.1, 2), "stationary 1.5": rule_stationary(1.5),
         "stationary 2": rule_stationary(2.0)}


def _finite(x) -> float:
    """A drift read back from JSON: null (inf when written) -> inf."""
    return math.inf if x is None else float(x)


def replay(rows: list) -> dict:
    out = {}
    rows = [dict(r, checkpoints=[dict(c, drift=_finite(c["drift"]), drift2=_finite(c["drift2"]))
                                 for c in r["checkpoints"]]) for r in rows]
    for label, rule in RULES.items():
        cases = []
        for r in rows:
            cps = [c for c in r["checkpoints"] if "z2" in c]
            i = rule(r["checkpoints"])
            scored = None if i is None else next((c for c in cps if c["step"] >= r["checkpoints"][i]["step"]), None)
            final = r["final"]
            chosen = final if scored is None else scored
            cases.append({"problem": r["problem"], "M": r["M"], "trial": r["trial"],
                          "stop_step": chosen["step"], "full_step": final["step"],
                          "z2": chosen["z2"], "z2_full": final["z2"], "kl": chosen["cert_kl"],
                          "kl_full": final["cert_kl"]})
        z2_ratio = [c["z2"] / max(c["z2_full"], 1e-12) for c in cases]
        kl_diff = [c["kl"] - c["kl_full"] for c in cases]
        out[label] = {"median_stop_step": float(np.median([c["stop_step"] for c in cases])),
                      "median_z2_ratio": float(np.median(z2_ratio)), "max_z2_ratio": float(np.max(z2_ratio)),
                      "median_kl_minus_full": float(np.median(kl_diff)), "max_kl_minus_full": float(np.max(kl_diff)),
                      "cases": cases}
    return out


def report(rows: list, out_dir: str, stem: str = "coreset_mcmc_stop") -> dict:
    result = {"environment": common.environment(), "rules": replay(rows) if rows else {}, "runs": rows}
    common.write_json(result, out_dir, stem)
    plot(rows, out_dir, stem)
    return result


def plot(rows, out_dir, stem):
    if not rows:
        return
    fig, axes = common.figure(1, 2, size=(5.0, 3.6))
    for i, r in enumerate(rows):
        cps = [c for c in r["checkpoints"] if "z2" in c] + [r["final"]]
        steps = [c["step"] for c in cps]
        axes[0][0].plot(steps, [c["z2"] for c in cps], "o-", ms=2, color=f"C{i % 10}",
                        label=f"{r['problem']} M={r['M']} t{r['trial']}")
        axes[0][1].plot(steps, [max(c["cert_kl"], 1e-6) for c in cps], "o-", ms=2, color=f"C{i % 10}")
    for ax, label in zip(axes[0], ("z2 of the iterate", "certificate KL of the iterate")):
        ax.set_xscale("log"), ax.set_yscale("log"), ax.set_xlabel("training iterations"), ax.set_ylabel(label)
    axes[0][0].legend(fontsize=5)
    common.save_figure(fig, out_dir, stem)


def ledger() -> list:
    if not os.path.exists(LEDGER):
        return []
    with open(LEDGER) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS))
        p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
        p.add_argument("--report", action="store_true", help="only aggregate the ledger")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    if args.quick:
        name = "gaussian_location"
        problem = models.load_problem(name, args.data_dir)
        ref = models.reference(name, problem)
        rows = [run_one(name, problem, ref, 30, 0, {"num_iters": 2500})]
        return report(rows, args.out, "coreset_mcmc_stop_quick")
    if not args.report:
        done = {(r["problem"], r["M"], r["trial"]) for r in ledger()}
        commit = common.environment()["git_commit"]
        for name in args.problems:
            problem = models.load_problem(name, args.data_dir)
            ref = models.reference(name, problem)
            for size in args.sizes:
                for trial in range(args.trials or 2):
                    if (name, size, trial) in done or size >= models.n_rows(problem):
                        continue
                    row = run_one(name, problem, ref, size, trial, {})
                    row["commit"] = commit
                    os.makedirs(models.TMP, exist_ok=True)
                    with open(LEDGER, "a") as f:
                        f.write(json.dumps(common.jsonable(row)) + "\n")
                    print(f"{name} M={size} t{trial}: {row['construct_s']:.0f} s; final z2 {row['final']['z2']:.3g} "
                          f"KL {row['final']['cert_kl']:.3g}; per checkpoint z2 "
                          f"{[round(c.get('z2', np.nan), 4) for c in row['checkpoints']]}", flush=True)
    return report(ledger(), args.out)


if __name__ == "__main__":
    main()
