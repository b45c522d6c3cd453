"""OMP's step budget: the reference library's M steps against the package's default 2 M (issue 36).

At N = 5e5 (D = 10) OMP's passes over V are the largest run-time cost of a cold `cj.coreset`: 200 steps at
M = 100, each one pass over a 5e5 x 160 V. The reference library (bayesian-coresets, `build(M)`) builds a
coreset of size M in M steps, each a selection and an NNLS refit, and a row that the refit drops has spent its
step. `cj.coreset(..., method="omp", max_iter=M)` runs that budget: half the passes. This measures what it
costs in quality.

Suite part (default): the problems of benchmarks/models.py that the certificate applies to (all but the spike
and slab, whose Gibbs kernel it does not cover), OMP at M = 100 and 300 (M < N), 2 trials; both budgets on the
same V (the same key): OMP's relative error on V, its points and steps, then NUTS 2 x (400 + 400) on each
coreset and `cj.certify` against all rows (KL estimate, k-hat, verdict).

`--large`: vs_peers.py's NumPyro logistic and Poisson regression (D = 10) at N = 5e5, OMP at M = 100 (vs_peers'
fixed route): the same, plus each budget's construction time (its second call: compiled) and the largest
|difference| of the two coreset posteriors' means in their pooled sd.

    python benchmarks/investigations/omp_budget.py [--problems ...] [--trials 2]
    python benchmarks/investigations/omp_budget.py --large [--trials 2]
Writes results/omp_budget.json (omp_budget_large.json with --large) after every cell; the suite part resumes
(cells already there are kept).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [os.path.dirname(HERE), HERE, os.path.join(HERE, "investigations")]

import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

PROBLEMS = tuple(p for p in models.PROBLEMS if p != "spike_and_slab")
SIZES = (100, 300)
QUICK = {"problems": ("ds1",), "sizes": (100,), "trials": 1}
BUDGETS = {"2M": None, "M": 1}  # max_iter = None (the default, 2 M) or 1 x M
DRAWS = {"num_samples": 400, "num_warmup": 400, "num_chains": 2}
REAL = ("phishing", "ds1", "biketrips_large", "airportdelays_large")  # the shared files models.py reads
LARGE = ("logistic10", "poisson10")
LARGE_N, LARGE_M = 500_000, 100


def _budget(name: str, m: int):
    return None if BUDGETS[name] is None else BUDGETS[name] * m


def _score(model, data, cs, key) -> dict:
    """NUTS on the coreset, then its certificate: the quality numbers of one coreset, and its draws."""
    import jax

    post = cj.sample(model, data, key, weights=cs, warn=False, **DRAWS)
    cert = cj.certify(model, data, cs, post.samples)
    draws = np.asarray(post.samples, np.float64).reshape(-1, post.samples.shape[-1])
    jax.block_until_ready(post.samples)
    return {"points": int(cs.num_points), "steps": int(cs.info["iterations"]),
            "relative_error": float(cs.info["relative_error"]), "kl": float(cert.kl), "kl_se": float(cert.kl_se),
            "khat": float(cert.khat), "verdict": str(cert.verdict)}, draws


def suite(args) -> dict:
    import jax

    cfg = dict(QUICK) if args.quick else {"problems": args.problems, "sizes": SIZES, "trials": args.trials or 2}
    stem = common.stem("omp_budget", args.quick)
    path = os.path.join(args.out, stem + ".json")
    rows = json.load(open(path)).get("runs", []) if os.path.exists(path) and not args.quick else []
    done = {(r["problem"], r["M"], r["trial"], r["budget"]) for r in rows}
    result = {"settings": {**{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
                           "budgets": {k: ("2 M (default)" if v is None else f"{v} M") for k, v in BUDGETS.items()},
                           "draws": DRAWS},
              "environment": common.environment(), "runs": rows}
    for name in cfg["problems"]:
        if name in REAL and not os.path.exists(os.path.join(args.data_dir, name + ".npz")):
            print(f"{name}: its data file is absent, skipped", flush=True)
            continue
        problem = models.load_problem(name, args.data_dir)
        model, data = problem["model"], problem["data"]
        for trial in range(cfg["trials"]):
            for m in cfg["sizes"]:
                if m >= models.n_rows(problem):
                    continue
                for budget in BUDGETS:
                    if (name, m, trial, budget) in done:
                        continue
                    key = jax.random.key(1000 * trial + m)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        cs = cj.coreset(model, data, m, "omp", key=key, max_iter=_budget(budget, m))
                        scores, _ = _score(model, data, cs, jax.random.key(trial + 17))
                    row = {"problem": name, "M": m, "trial": trial, "budget": budget, **scores}
                    rows.append(row)
                    print(f"{name} M={m} trial {trial} budget {budget}: error {row['relative_error']:.2e}, "
                          f"points {row['points']}, steps {row['steps']}, KL {row['kl']:.2e} ({row['verdict']})",
                          flush=True)
                    result["table"] = summarise(rows)
                    common.write_json(common.jsonable(result), args.out, stem)
    return common.write_table(result, rows, summarise, markdown, args.out, stem)


def summarise(rows: list) -> list:
    """Per (problem, M): medians over trials for each budget, and the largest error ratio M / 2M."""
    out = []
    for problem, m in sorted({(r["problem"], r["M"]) for r in rows}):
        cell = {"problem": problem, "M": m}
        by = {b: [r for r in rows if (r["problem"], r["M"], r["budget"]) == (problem, m, b)] for b in BUDGETS}
        if not all(by.values()):
            continue
        for b, rs in by.items():
            for k in ("relative_error", "points", "steps", "kl"):
                cell[f"{b}_{k}"] = float(np.median([r[k] for r in rs]))
            cell[f"{b}_verdicts"] = sorted({r["verdict"] for r in rs})
        pairs = [(r, s) for r in by["M"] for s in by["2M"] if r["trial"] == s["trial"]]
        cell["error_ratio_max"] = float(max(r["relative_error"] / s["relative_error"] for r, s in pairs))
        cell["trials"] = len(pairs)
        out.append(cell)
    return out


def markdown(table: list) -> str:
    lines = ["| problem | M | error 2M | error M | worst ratio M / 2M | points 2M / M | steps 2M / M | "
             "certificate KL 2M / M | verdicts 2M / M |", "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        lines.append(
            f"| {t['problem']} | {t['M']} | {t['2M_relative_error']:.2e} | {t['M_relative_error']:.2e} | "
            f"{t['error_ratio_max']:.1f} | {t['2M_points']:.0f} / {t['M_points']:.0f} | "
            f"{t['2M_steps']:.0f} / {t['M_steps']:.0f} | {t['2M_kl']:.1e} / {t['M_kl']:.1e} | "
            f"{', '.join(t['2M_verdicts'])} / {', '.join(t['M_verdicts'])} |")
    return "\n".join(lines)


def large(args) -> dict:
    """The `--large` part (module docstring)."""
    import jax
    import certify_precision

    n = 20_000 if args.quick else LARGE_N
    problems = LARGE[:1] if args.quick else LARGE
    trials = 1 if args.quick else (args.trials or 2)
    stem = common.stem("omp_budget_large", args.quick)
    result = {"settings": {"problems": list(problems), "N": n, "M": LARGE_M, "trials": trials, "draws": DRAWS,
                           "budgets": list(BUDGETS)},
              "environment": common.environment(), "runs": []}
    for label in problems:
        model, data = certify_precision._problem(label, n)
        for trial in range(trials):
            key = jax.random.key(trial)
            means = {}
            for budget in BUDGETS:
                opts = {"max_iter": _budget(budget, LARGE_M)}
                jax.block_until_ready(cj.coreset(model, data, LARGE_M, "omp", key=key, **opts).weights)
                t = time.perf_counter()
                cs = cj.coreset(model, data, LARGE_M, "omp", key=key, **opts)
                jax.block_until_ready(cs.weights)
                build_s = time.perf_counter() - t
                scores, draws = _score(model, data, cs, jax.random.fold_in(key, 1))
                means[budget] = (draws.mean(0), draws.std(0))
                row = {"problem": label, "N": n, "M": LARGE_M, "trial": trial, "budget": budget,
                       "build_s": build_s, **scores}
                if budget == "M":
                    (m0, s0), (m1, s1) = means["2M"], means["M"]
                    row["max_z_between"] = float(np.max(np.abs(m1 - m0) / np.sqrt(0.5 * (s0 ** 2 + s1 ** 2))))
                result["runs"].append(row)
                print(f"{label} N={n} trial {trial} budget {budget}: build {build_s:.2f} s, steps {row['steps']}, "
                      f"error {row['relative_error']:.2e}, points {row['points']}, KL {row['kl']:.2e} "
                      f"({row['verdict']})" + (f", z between budgets {row['max_z_between']:.3f}"
                                               if "max_z_between" in row else ""), flush=True)
                common.write_json(common.jsonable(result), args.out, stem)
    return result


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
        p.add_argument("--data-dir", default=common.DATA_DIR)
        p.add_argument("--large", action="store_true", help="N = 5e5, with build times (module docstring)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    return large(args) if args.large else suite(args)


if __name__ == "__main__":
    main()
