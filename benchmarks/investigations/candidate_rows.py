"""What `cj.coreset(..., candidate_rows=R)` costs and what it gives up, at large N (issue 36: OMP's cost per
iteration on fewer than N rows).

With candidates, OMP chooses among a uniform R of the N rows and fits the full data's feature sum, computed in
one streamed pass (`features.projection.candidate_features`); without, it makes ~2 M passes over the N x J
matrix V. For each problem, N and R (0 = every row) and trial, in one process:
  - the construction's first call (compilation included) and second call (`cj.coreset`, OMP, M, J = 500);
  - the coreset's relative error ||sum_n v_n - V^T w|| / ||sum_n v_n|| on every row's features (the V of the
    all-rows run, same keys, so the same features);
  - the certificate's KL(pi_w || pi) and k-hat (`cj.certify` on 2 x (500 + 500) NUTS draws of the coreset
    posterior, one pass over the N rows), and the max |z| of the posterior mean against the all-rows coreset's
    draws (sd from those draws; both coresets are near exact, so this is the change the candidates make).
Candidates are drawn as the package draws them (half uniform, half by leverage in the Fisher information at
pi_hat's mean; `construct/pipeline.py`, `_candidate_rows`) and, for comparison, as a plain uniform subsample.
Problems: vs_peers.py's synthetic logistic and Poisson regression (D = 10, Gaussian covariates) and LR §4's
BINARY10 (rare binary covariates with large coefficients: the hard case for a uniform subsample of rows).

    python benchmarks/investigations/candidate_rows.py --n 500000 --rows 0 100000 30000 --trials 2 --selections leverage uniform
Writes benchmarks/results/candidate_rows.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.construct import pipeline  # noqa: E402
import common  # noqa: E402
import vs_peers  # noqa: E402

PROBLEMS = ("logistic10", "poisson10", "binary10")
LEVERAGE_ROWS = pipeline._candidate_rows  # the package's selection: half uniform, half by leverage


def uniform_rows(model, data, thetas, key, rows):
    """The alternative measured here: a plain uniform subsample of rows (sorted)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    return jax.numpy.sort(jax.random.choice(key, n, (rows,), replace=False)).astype(jax.numpy.int32)


SELECTIONS = {"leverage": LEVERAGE_ROWS, "uniform": uniform_rows}


def load(name: str, n: int):
    if name == "binary10":
        ds = cj.data.synthetic_binary(jax.random.key(5), n, dim=10)
        return cj.models.logistic_regression(), ds.train
    kind, d = vs_peers.MODELS[name]
    X, y, _ = vs_peers.make_data(kind, d, n)
    if kind == "logistic":
        return cj.models.logistic_regression(), (jax.numpy.asarray(X), jax.numpy.asarray(y))
    return cj.models.poisson_regression(), (jax.numpy.asarray(X), jax.numpy.asarray(y))


def variants(rows_list, selections):
    """(rows, selection) pairs: every row once, then each cap with each selection."""
    return [(0, "-")] + [(r, s) for r in rows_list if r != 0 for s in selections]


def run(name: str, n: int, rows_list, size: int, trials: int, selections) -> list:
    model, data = load(name, n)
    out = []
    for trial in range(trials):
        key = jax.random.key(100 + trial)
        base_draws, V = None, None
        for rows, selection in variants(rows_list, selections):
            cand = None if rows == 0 else rows
            if cand is not None:
                pipeline._candidate_rows = SELECTIONS[selection]
            extra = {"return_vectors": True} if cand is None else {"candidate_rows": cand}
            t0 = time.perf_counter()
            result = cj.coreset(model, data, size, "omp", key, **extra)
            cs = result[0] if cand is None else result
            jax.block_until_ready(cs.weights)
            first = time.perf_counter() - t0
            if cand is None:
                V = result[1]
                del result
            t0 = time.perf_counter()
            again = cj.coreset(model, data, size, "omp", key, candidate_rows=cand)
            jax.block_until_ready(again.weights)
            second = time.perf_counter() - t0
            del again
            post = cj.sample(model, data, jax.random.fold_in(key, 3), weights=cs, num_samples=500, num_warmup=500,
                             num_chains=2, warn=False)
            draws = np.asarray(post.samples, np.float64).reshape(-1, post.samples.shape[-1])
            cert = cj.certify(model, data, cs, post.samples)
            row = {"problem": name, "N": n, "rows": rows, "selection": selection, "M": size, "trial": trial, "first_s": first,
                   "second_s": second, "points": int(cs.num_points),
                   "relative_error": float(cj.relative_error(V, cs)) if V is not None else None,
                   "reported_error": float(cs.info["relative_error"]), "kl": float(cert.kl),
                   "khat": float(cert.khat), "verdict": str(cert.verdict)}
            if cand is None:
                base_draws = draws
            row["max_abs_z"] = float(np.max(np.abs(draws.mean(0) - base_draws.mean(0)) / base_draws.std(0)))
            out.append(row)
            print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        del V
    return out


def summarize(runs: list) -> list:
    cells = sorted({(r["problem"], r["N"], r["rows"], r["selection"]) for r in runs},
                   key=lambda c: (c[0], c[1], c[2] != 0, -c[2], c[3]))
    table = []
    for problem, n, rows, selection in cells:
        rs = [r for r in runs if (r["problem"], r["N"], r["rows"], r["selection"]) == (problem, n, rows, selection)]
        base = [r for r in runs if (r["problem"], r["N"], r["rows"]) == (problem, n, 0)]
        med = lambda k, xs=rs: float(np.median([r[k] for r in xs]))  # noqa: E731
        table.append({"problem": problem, "N": n, "rows": rows, "selection": selection, "trials": len(rs),
                      "first_s": med("first_s"), "second_s": med("second_s"),
                      "second_ratio_to_all_rows": med("second_s") / med("second_s", base) if base else None,
                      "relative_error": med("relative_error"), "kl": med("kl"), "kl_max": max(r["kl"] for r in rs),
                      "khat_max": max(r["khat"] for r in rs), "max_abs_z": max(r["max_abs_z"] for r in rs),
                      "points": med("points")})
    return table


def markdown(table: list) -> str:
    lines = ["| problem | N | candidate rows | selection | first call s | second call s (vs every row) | relative error | "
             "certificate KL (max) | max \\|z\\| vs every row |", "|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        rows = "every row" if e["rows"] == 0 else f"{e['rows']:,}"
        ratio = "" if e["rows"] == 0 else f" ({e['second_ratio_to_all_rows']:.2f}x)"
        lines.append(f"| {e['problem']} | {e['N']:,} | {rows} | {e['selection']} | {e['first_s']:.1f} | {e['second_s']:.2f}{ratio} | "
                     f"{e['relative_error']:.2g} | {e['kl']:.2g} ({e['kl_max']:.2g}) | "
                     f"{e['max_abs_z']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
        p.add_argument("--n", nargs="+", type=int, default=None, help="N (default 500,000)")
        p.add_argument("--rows", nargs="+", type=int, default=None,
                       help="candidate rows, 0 = every row (default 0 100000 30000)")
        p.add_argument("--size", type=int, default=100)
        p.add_argument("--selections", nargs="+", default=list(SELECTIONS), choices=list(SELECTIONS))

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    sizes = args.n or ([4000] if args.quick else [500_000])
    rows_list = args.rows or ([0, 1000] if args.quick else [0, 100_000, 30_000])
    rows_list = [0] + [r for r in rows_list if r != 0]
    problems = ["binary10"] if args.quick else args.problems
    size = 20 if args.quick else args.size
    trials = 1 if args.quick else (args.trials or 2)
    warnings.simplefilter("ignore")
    runs = []
    try:
        for n in sizes:
            for name in problems:
                runs += run(name, n, rows_list, size, trials, args.selections)
    finally:
        pipeline._candidate_rows = LEVERAGE_ROWS
    table = summarize(runs)
    result = {"environment": common.environment(), "size": size, "num_features": 500, "runs": runs,
              "table": table, "table_markdown": markdown(table),
              "note": "one process; first call includes compilation (later rows reuse programs of earlier ones "
                      "where shapes match); second call is the same call again"}
    path = common.write_json(result, args.out, common.stem("candidate_rows", args.quick))
    print(result["table_markdown"])
    print("wrote", path)
    return result


if __name__ == "__main__":
    main()
