"""Coreset MCMC against the subsampling MCMC that users pick instead: SGLD and SGHMC with control variates
(coreset-mcmc.md §4.2), at equal numbers of likelihood evaluations and at equal wall time, compilation
included (issue 21).

For each problem and trial:
  1. Coreset MCMC with the package defaults (`cj.coreset(..., "coreset_mcmc")`, OMP start): its wall time
     (first call in the process: compilation included) and its likelihood evaluations, counted as
       N J (Fisher projection of the start: one per-row gradient per feature draw) + N (the control
       variate's gradient pass) + (hot start + iterations + 2 x num_draws + one burn-in at the start, taken
       as long as the hot start) x K x (slice density evaluations per step, measured) x live rows
       + iterations x K x 2 S (the full-data estimate: each subsample row at theta and at the anchor).
     Its draws are its own (`info["samples"]`, K x 500): the sampler a user gets.
  2. SGLD and SGHMC (`cj.baselines.sgmcmc`, batch 500, control variates at the Laplace mode, 2 chains,
     10% burn-in) with as many steps as give (a) the same likelihood evaluations, (b) the same wall time,
     compilation included (calibrated from a short compiled run; the actual time is recorded).
All are scored against the full-data reference of models.py: z2 (hot-dog.md §4.2) and W1 / noise floor on
2,000 draws (thinned evenly).

    python benchmarks/sgmcmc_baselines.py --problems biketrips_large gaussian_location --trials 2
Writes benchmarks/results/sgmcmc_baselines.json.
"""

from __future__ import annotations

import json
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
from coresets_jax.baselines import sgmcmc  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

BATCH = 500
CHAINS = 2


def thinned(draws, num=2000):
    draws = np.asarray(draws, np.float64).reshape(-1, draws.shape[-1])
    return draws[np.linspace(0, len(draws) - 1, min(num, len(draws))).astype(int)]


def score(draws, ref):
    d = thinned(draws)
    return {"z2": models.z2(d, ref), "w1_floor": models.w1_floor(d, ref)}


def coreset_mcmc_evaluations(cs, n, num_features=500):
    info = cs.info
    k, draws = info["samples"].shape[0], info["samples"].shape[1]
    steps = int(info["iterations"]) + int(info["hot_start_steps"]) + 2 * draws  # hot start, training, two draw rounds
    live = int(cs.num_points)
    per_step = float(info["density_evaluations_per_step"])
    return int(n * num_features + n + steps * k * per_step * live
               + int(info["iterations"]) * k * 2 * int(info["subsample_rows"]))


def run_sg(problem, method, steps, key, anchor):
    warmup = max(steps // 10, 1)
    return sgmcmc(problem["model"], problem["data"], key, method, num_samples=max(steps - warmup, 1),
                  num_warmup=warmup, num_chains=CHAINS, batch_size=BATCH, anchor=anchor)


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=["biketrips_large", "gaussian_location"])
        p.add_argument("--size", type=int, default=100)
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    trials = args.trials or 2
    runs = []
    for name in args.problems:
        problem = models.load_problem(name, args.data_dir)
        ref = models.reference(name, problem)
        n = models.n_rows(problem)
        anchor = cj.laplace(problem["model"], problem["data"])
        for trial in range(trials):
            key = jax.random.key(1000 * trial + args.size)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cs = cj.coreset(problem["model"], problem["data"], args.size, "coreset_mcmc", key=key)
                jax.block_until_ready(cs.weights)
            cm_s = time.perf_counter() - t0
            cm_evals = coreset_mcmc_evaluations(cs, n)
            row = {"problem": name, "trial": trial, "M": args.size, "N": n, "method": "coreset_mcmc",
                   "wall_s": cm_s, "evaluations": cm_evals, "iterations": int(cs.info["iterations"]),
                   "fell_back": bool(cs.info["fell_back"]), **score(cs.info["samples"], ref)}
            runs.append(row)
            print(json.dumps(row), flush=True)
            for method in ("sgld", "sghmc"):
                per_step = 2 * BATCH * (1 if method == "sgld" else 10) * CHAINS
                # (a) equal likelihood evaluations
                steps = max(int((cm_evals - n) / per_step), 20)
                res = run_sg(problem, method, steps, jax.random.fold_in(key, 1), anchor)
                eval_steps, eval_s = steps, res.wall_time
                runs.append({"problem": name, "trial": trial, "M": args.size, "N": n, "method": method,
                             "budget": "evaluations", "steps": steps, "wall_s": res.wall_time,
                             "evaluations": res.gradient_evaluations, "step_size": res.step_size,
                             **score(res.samples, ref)})
                print(json.dumps(runs[-1]), flush=True)
                # (b) equal wall time, compilation included (every call compiles its own scan): wall(s) =
                # c + s p, from a 200-step probe and the equal-evaluations run
                probe = run_sg(problem, method, 200, jax.random.fold_in(key, 2), anchor).wall_time
                per_s = (eval_s - probe) / (eval_steps - 200) if eval_steps > 2000 and eval_s > probe else eval_s / eval_steps
                per_s = max(per_s, 1e-7)
                compile_s = max(probe - 200 * per_s, 0.0)
                steps = int(min(max((cm_s - compile_s) / per_s, 20), 2_000_000))
                res = run_sg(problem, method, steps, jax.random.fold_in(key, 3), anchor)
                runs.append({"problem": name, "trial": trial, "M": args.size, "N": n, "method": method,
                             "budget": "wall_time", "steps": steps, "wall_s": res.wall_time,
                             "calibration_compile_s": compile_s, "calibration_step_s": per_s,
                             "evaluations": res.gradient_evaluations, "step_size": res.step_size,
                             **score(res.samples, ref)})
                print(json.dumps(runs[-1]), flush=True)
    cells = {}
    for r in runs:
        cells.setdefault((r["problem"], r["method"], r.get("budget", "own")), []).append(r)
    table = [{"problem": p, "method": m, "budget": b,
              **{k: float(np.median([r[k] for r in rs])) for k in ("z2", "w1_floor", "wall_s", "evaluations")}}
             for (p, m, b), rs in sorted(cells.items())]
    result = {"environment": common.environment(),
              "command": "python benchmarks/sgmcmc_baselines.py " + " ".join(sys.argv[1:]),
              "reductions": {"trials": f"{trials} (the paper: 10)", "sizes": f"M = {args.size} (the paper's box "
                             "plots: M = 500)", "problems": args.problems,
                             "settings": "SGLD/SGHMC step sizes from the Laplace curvature (ours), not the "
                                         "authors' hand-set constants; batch 500 as theirs"},
              "table": table, "runs": runs}
    common.write_json(result, args.out, "sgmcmc_baselines")
    return result


if __name__ == "__main__":
    main()
