"""How often `cj.refine` trades an exact start for something worse: the false-positive rate of its
comparisons, on problems where the start cannot be beaten.

Gaussian location (closed-form posteriors, so the exact KL(pi_w || pi) of every coreset is known): OMP's
coreset on M > D + 1 points matches the full posterior to float32 rounding (KL ~ 1e-6), so any "trained"
answer is at best as good. For each trial and method of `cj.refine` (time budget off, the methods' own
iteration caps), this records:
  - the final choice (`info["kept"]`, by the float64 certificates): a false positive is "trained" with an
    exact KL above the start's;
  - for quasi-Newton, the in-loop paired comparison (`keep_best`): a false positive is an iterate that
    replaced the start (`chosen_step` > 0) with an exact KL above the start's, and whether the
    confirmation on fresh draws let it through (`confirmed`);
  - the exact KLs (float64) of the start, of the trained weights and of the returned coreset; "worse" means
    above 1.1 x the start's + 1e-4 nats (the float32 rounding of the weights).
A second set of trials starts from a deliberately poor coreset (uniform) to show the same comparisons do
accept real gains (the true-positive rate).

    python benchmarks/refine_calibration.py --trials 20
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

METHODS = ("coreset_mcmc", "quasi_newton")


def problem(d: int, n: int):
    y = cj.data.synthetic_gaussian(jax.random.key(2024), n, dim=d, mean=jnp.ones(d))
    model = cj.models.gaussian_mean(d)
    y64 = np.asarray(y, np.float64)

    def kl(weights_dense):
        """Exact KL(pi_w || pi) in float64: pi_w = N(sum w y / (1 + sum w), I / (1 + sum w)) (prior N(0, I))."""
        w = np.asarray(weights_dense, np.float64)
        a, b = 1.0 + w.sum(), 1.0 + n
        mean_w, mean = w @ y64 / a, y64.sum(0) / b
        return float(0.5 * (d * (b / a - 1.0 - np.log(b / a)) + b * np.sum((mean_w - mean) ** 2)))

    return model, y, kl


WORSE = 1e-4   # nats: exact KLs closer than this differ by the float32 rounding of the weights


def trial(model, y, kl, start_method: str, size: int, method: str, seed: int) -> dict:
    n = y.shape[0]
    start = cj.coreset(model, y, size, start_method, key=jax.random.key(seed))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cj.refine(model, y, start, jax.random.key(1000 + seed), method=method, time_budget=math.inf)
    seconds = time.perf_counter() - t0
    trained = cj.Coreset(jnp.asarray(out.info["trained_indices"]), jnp.asarray(out.info["trained_weights"]), {},
                         "trained")
    row = {"start": start_method, "method": method, "seed": seed, "M": size, "seconds": seconds,
           "kept": out.info["kept"], "kl_start": kl(start.dense(n)), "kl_trained": kl(trained.dense(n)),
           "kl_returned": kl(out.dense(n)), "cert_kl_start": float(out.info["start_certificate"].kl),
           "cert_kl_trained": float(out.info["trained_certificate"].kl),
           "verdict_trained": out.info["trained_certificate"].verdict}
    if method == "quasi_newton":
        row.update(chosen_step=int(out.info["chosen_step"]), confirmed=bool(out.info["confirmed"]))
    return row


def summarise(rows: list) -> dict:
    out = {}
    for start in sorted({r["start"] for r in rows}):
        for method in METHODS:
            rs = [r for r in rows if r["start"] == start and r["method"] == method]
            if not rs:
                continue
            worse = [r["kl_trained"] > 1.1 * r["kl_start"] + WORSE for r in rs]
            entry = {"trials": len(rs),
                     "kept_trained": sum(r["kept"] == "trained" for r in rs),
                     "trained_worse_than_start": sum(worse),
                     "final_false_positives": sum(r["kept"] == "trained" and w for r, w in zip(rs, worse)),
                     "returned_worse_than_start": sum(r["kl_returned"] > 1.1 * r["kl_start"] + WORSE for r in rs),
                     "median_kl_start": float(np.median([r["kl_start"] for r in rs])),
                     "median_kl_returned": float(np.median([r["kl_returned"] for r in rs])),
                     "median_seconds": float(np.median([r["seconds"] for r in rs]))}
            if method == "quasi_newton":
                entry["in_loop_moved"] = sum(r["chosen_step"] > 0 for r in rs)
                entry["in_loop_false_positives"] = sum(r["chosen_step"] > 0 and w for r, w in zip(rs, worse))
                entry["in_loop_false_positives_confirmed"] = sum(
                    r["chosen_step"] > 0 and r["confirmed"] and w for r, w in zip(rs, worse))
            out[f"{start} start, {method}"] = entry
    return out


def plot(rows, out_dir, stem):
    fig, axes = common.figure(1, 2, size=(4.2, 3.6))
    for ax, start in zip(axes[0], ("omp", "uniform")):
        for i, method in enumerate(METHODS):
            rs = [r for r in rows if r["start"] == start and r["method"] == method]
            if rs:
                ax.scatter([max(r["kl_start"], 1e-9) for r in rs], [max(r["kl_returned"], 1e-9) for r in rs],
                           s=10, color=f"C{i}", label=method)
        lim = ax.get_xlim()
        ax.plot([1e-9, 1e3], [1e-9, 1e3], "k:", lw=0.8)
        ax.set_xscale("log"), ax.set_yscale("log"), ax.set_title(f"{start} start", fontsize=9)
        ax.set_xlabel("exact KL of the start"), ax.set_ylabel("exact KL returned by refine")
        ax.set_xlim(lim)
    axes[0][0].legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--dim", type=int, default=5)
        p.add_argument("--n", type=int, default=2000)
        p.add_argument("--size", type=int, default=20)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    trials = 1 if args.quick else (args.trials or 20)
    model, y, kl = problem(args.dim, 300 if args.quick else args.n)
    rows = []
    for start in ("omp", "uniform"):
        for method in METHODS:
            for seed in range(trials):
                rows.append(trial(model, y, kl, start, args.size, method, seed))
                r = rows[-1]
                print(f"{start} {method} seed {seed}: kept {r['kept']}, KL start {r['kl_start']:.3g} trained "
                      f"{r['kl_trained']:.3g} returned {r['kl_returned']:.3g} ({r['seconds']:.1f} s)", flush=True)
    stem = common.stem("refine_calibration", args.quick)
    result = {"environment": common.environment(), "problem": {"model": "gaussian_location", "D": args.dim,
                                                                 "N": int(y.shape[0]), "M": args.size},
              "summary": summarise(rows), "runs": rows}
    common.write_json(result, args.out, stem)
    plot(rows, args.out, stem)
    return result


if __name__ == "__main__":
    main()
