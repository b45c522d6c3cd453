"""Hot DoG against Adam over learning rates, as the error ratio of hot-dog.md Fig. 1 (issue 21).

Coreset MCMC as published (`method="coreset_mcmc"` with its defaults: M rows drawn uniformly, weights N / M,
K = 2 chains of the authors' slice sampler, S = M rows per estimate, the last iterate) runs a fixed budget of
T iterations with
  - Adam, gamma / sqrt(t), no hot start, gamma in {1e-3, 1e-2, 0.1, 1, 10, 100} (the paper's Fig. 1 baseline);
  - Hot DoG, r = 0.001, with the hot start (the paper's method, the default);
  - the project's natural-gradient step, optimizer="newton", with the hot start, same budget and otherwise
    the published settings (beside them; not in the paper).
Each coreset is scored as in models.py: z2, the mean over coordinates of the squared z-score of the coreset
posterior mean against the full-data reference (2 x 1000 NUTS draws of the coreset posterior), and W1 /
noise floor. The figure's quantity is median z2 of Adam(gamma) / median z2 of Hot DoG: above 1 means Hot
DoG is better.

    python benchmarks/investigations/hot_dog_adam.py --problems gaussian_location biketrips_large --sizes 100 --trials 2 \
        --iters 5000
Runs are appended to benchmarks/results/tmp/hot_dog_adam_runs.jsonl (resumable); the report is
benchmarks/results/hot_dog_adam.{json,png}.
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file: benchmarks/investigations/)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import common  # noqa: E402
import models  # noqa: E402

RATES = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
LEDGER = os.path.join(models.TMP, "hot_dog_adam_runs.jsonl")


def configs(iters: int) -> dict:
    fixed = {"num_iters": iters, "stop_tol": 0.0}
    out = {f"adam_{g:g}": dict(fixed, optimizer="adam", learning_rate=g, learning_rate_decay=0.5, hot_start=False)
           for g in RATES}
    out["hot_dog"] = dict(fixed, optimizer="hot_dog", r=1e-3)
    out["newton"] = dict(fixed, optimizer="newton")
    return out


def report(rows, out_dir):
    cells = {}
    for r in rows:
        cells.setdefault((r["problem"], r["M"]), {}).setdefault(r["method"], []).append(r)
    table = []
    for (problem, size), by in sorted(cells.items()):
        med = {m: float(np.median([r["z2"] for r in rs])) for m, rs in by.items()}
        ref = med.get("hot_dog")
        table.append({"problem": problem, "M": size, "median_z2": med,
                      "median_w1_floor": {m: float(np.median([r["w1_floor"] for r in rs])) for m, rs in by.items()},
                      "ratio_to_hot_dog": {m: (v / ref if ref else None) for m, v in med.items()},
                      "trials": {m: len(rs) for m, rs in by.items()}})
    result = {"environment": common.environment(), "table": table, "runs": rows,
              "reductions": {"iterations": "T = " + ", ".join(sorted({str(r.get("iters")) for r in rows}))
                             + " per run (the paper: 200,000)",
                             "trials": "see `trials` per cell (the paper: 10)",
                             "sizes": "M = 100 only (the paper: 100, 500, 1000)",
                             "problems": sorted({r["problem"] for r in rows}),
                             "metric": "z2 on 2 x 1000 NUTS draws of each coreset (the paper: running mean of "
                                       "the chains' own draws)",
                             "fallback": "none: the published method returns its last iterate",
                             "device": "shared 2-core CPU with other jobs running, no GPU"}}
    common.write_json(result, out_dir, "hot_dog_adam")
    fig, axes = common.figure(1, max(len(table), 1), size=(3.6, 3.2))
    for ax, e in zip(axes[0], table):
        xs = [g for g in RATES if f"adam_{g:g}" in e["ratio_to_hot_dog"]]
        ax.plot(xs, [e["ratio_to_hot_dog"][f"adam_{g:g}"] for g in xs], "o-", label="Adam(γ/√t) / Hot DoG")
        if "newton" in e["ratio_to_hot_dog"]:
            ax.axhline(e["ratio_to_hot_dog"]["newton"], color="C2", ls="--", label="newton (ours) / Hot DoG")
        ax.axhline(1.0, color="k", lw=0.8, ls=":")
        ax.set_xscale("log"), ax.set_yscale("log")
        ax.set_xlabel("Adam learning rate γ"), ax.set_title(f"{e['problem']}, M = {e['M']}", fontsize=9)
    axes[0][0].set_ylabel("median z2 relative to Hot DoG")
    axes[0][0].legend(fontsize=6)
    common.save_figure(fig, out_dir, "hot_dog_adam")
    return result


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=["gaussian_location", "biketrips_large"])
        p.add_argument("--sizes", nargs="+", type=int, default=[100])
        p.add_argument("--iters", type=int, default=5000)
        p.add_argument("--configs", nargs="+", default=None)
        p.add_argument("--report", action="store_true")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    trials = args.trials or 2
    rows = []
    if os.path.exists(LEDGER):
        with open(LEDGER) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    if not args.report:
        done = {(r["problem"], r["method"], r["M"], r["trial"], r["iters"]) for r in rows}
        chosen = configs(args.iters)
        if args.configs:
            chosen = {k: v for k, v in chosen.items() if k in args.configs}
        for name in args.problems:
            problem = models.load_problem(name, args.data_dir)
            ref = models.reference(name, problem)
            for size in args.sizes:
                for trial in range(trials):
                    for label, opts in chosen.items():
                        if (name, label, size, trial, args.iters) in done:
                            continue
                        try:
                            row = models.run_one(name, problem, ref, "coreset_mcmc", size, trial, opts, label)
                        except Exception as err:
                            row = {"problem": name, "method": label, "M": size, "trial": trial,
                                   "error": f"{type(err).__name__}: {err}"[:300]}
                        row["iters"] = args.iters
                        rows.append(row)
                        os.makedirs(models.TMP, exist_ok=True)
                        with open(LEDGER, "a") as f:
                            f.write(json.dumps(common.jsonable(row)) + "\n")
                        print("  " + json.dumps({k: (round(v, 5) if isinstance(v, float) else v)
                                                 for k, v in row.items()}), flush=True)
    return report([r for r in rows if "error" not in r], args.out)


if __name__ == "__main__":
    main()
