"""How many rows must the `support=` start project? (issue 21: the N = 10^6 time target with the OMP start)

For each problem, size M, row cap R and trial: the OMP start of `cj.coreset(support="omp")` is built on R
rows (every row, or a uniform subsample with weights scaled by N / R; `posterior_driven/support.py`), and
measured by
  - its cost (projection + OMP, compilation excluded: the call is made twice and the second is timed);
  - the one-pass certificate's KL(pi_w || pi) estimate (`cj.certify`) on 2 x 500 NUTS draws of the start's
    posterior, which needs no full-data MCMC, and its k-hat;
  - z2 against the cached full-data reference of models.py where one exists (biketrips_large).
With `--refine`, Coreset MCMC (defaults) is also run from each start and measured the same way.

    python benchmarks/investigations/support_rows.py --problems biketrips_large bradley_terry logistic_binary10 \
        --sizes 100 500 --rows 0 10000 3000 --trials 2          # 0 = every row
Writes benchmarks/results/support_rows.json (each run, medians per cell, reductions).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file: benchmarks/investigations/)
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.construct import build  # noqa: E402
from coresets_jax.posterior_driven.support import support_start  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402


def measure(problem, name, cs, key, ref):
    """Certificate KL, k-hat (and z2 where a reference is cached) of a coreset, from 2 x 500 NUTS draws."""
    model, data = problem["model"], problem["data"]
    post = cj.sample(model, data, key, weights=cs, num_samples=500, num_warmup=500, num_chains=2, warn=False)
    cert = cj.certify(model, data, cs, post.samples)
    out = {"cert_kl": float(cert.kl), "khat": float(cert.khat)}
    if ref is not None:
        out["z2"] = models.z2(np.asarray(post.samples, np.float64).reshape(-1, post.samples.shape[-1]), ref)
    return out


def start_for(problem, size, rows, key, features=None):
    model, data = problem["model"], problem["data"]
    n = models.n_rows(problem)
    approx = cj.laplace(model, data, key=key)
    thetas = approx.sample(jax.random.fold_in(key, 1), 500)
    r = n if rows in (0, None) else min(n, max(rows, 4 * size))

    def make():
        cs, _ = support_start(model, data, size, "omp", thetas, jax.random.fold_in(key, 2), rows=r, build=build,
                              features=features)
        jax.block_until_ready(cs.weights)
        return cs

    make()  # compile
    t0 = time.perf_counter()
    cs = make()
    return cs, time.perf_counter() - t0, r


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=["biketrips_large", "bradley_terry", "logistic_binary10"])
        p.add_argument("--sizes", nargs="+", type=int, default=[100, 500])
        p.add_argument("--rows", nargs="+", type=int, default=[0, 10_000, 3_000])
        p.add_argument("--refine", action="store_true")
        p.add_argument("--features", nargs="+", type=int, default=[0],
                       help="features of a subsampled start (0: the package rule, min(J, max(32, 8 D)))")
        p.add_argument("--tag", default="")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    trials = args.trials or 2
    runs = []
    for name in args.problems:
        problem = models.load_problem(name, args.data_dir)
        n = models.n_rows(problem)
        path = os.path.join(models.TMP, f"models_ref_{name}.npz")
        ref = models.reference(name, problem) if os.path.exists(path) else None
        for size in args.sizes:
            for rows, feats in itertools.product(args.rows, args.features):
                for trial in range(trials):
                    key = jax.random.key(100 * trial + size)
                    cs, seconds, r = start_for(problem, size, rows, key, feats or None)
                    row = {"problem": name, "N": n, "M": size, "rows": r, "trial": trial, "start_s": seconds,
                           "features": feats or "rule", "points": int(cs.num_points)}
                    row.update({"start_" + k: v for k, v in measure(problem, name, cs, jax.random.key(trial), ref).items()})
                    if args.refine:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            t0 = time.perf_counter()
                            refined = cj.coreset(problem["model"], problem["data"], size, "coreset_mcmc", key=key,
                                                 support_rows=r)
                            jax.block_until_ready(refined.weights)
                        row["refine_s"] = time.perf_counter() - t0
                        row.update({"refined_" + k: v for k, v in
                                    measure(problem, name, refined, jax.random.key(trial + 50), ref).items()})
                    runs.append(row)
                    print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}),
                          flush=True)
    cells = {}
    for r in runs:
        cells.setdefault((r["problem"], r["M"], r["rows"], str(r.get("features", "rule"))), []).append(r)
    table = [{"problem": p, "M": m, "rows": rows, "features": f, **{k: float(np.median([r[k] for r in rs]))
                                                                    for k in rs[0] if k.startswith(("start_", "refine"))}}
             for (p, m, rows, f), rs in sorted(cells.items())]
    result = {"environment": common.environment(), "command": "python benchmarks/investigations/support_rows.py " + " ".join(sys.argv[1:]),
              "reductions": {"trials": f"{trials} per cell", "draws": "2 x 500 NUTS after 500 warm-up per coreset",
                             "metric": "cj.certify KL estimate (no full-data MCMC); z2 only where models.py's "
                                       "reference is cached"},
              "table": table, "runs": runs}
    common.write_json(result, args.out, "support_rows" + args.tag)
    return result


if __name__ == "__main__":
    main()
