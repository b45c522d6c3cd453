"""OMP on a low-rank factor of V: is it exact enough to halve OMP's passes at N = 5e5? (issue 36)

OMP's 2 M passes over V (N x J) are most of a compiled `cj.coreset` at large N, and each pass is memory-bound.
The route's features at D = 10 (J = 160) are numerically low rank: their relative discarded energy
||V - A_W B_W^T||_F / ||V||_F at width W = J / 2 is about 1e-5. On A_W = V B_W (B_W the top W right singular
vectors, `cj.compress`'s factor) each pass reads W / J of the bytes, and every inner product of the selection
is unchanged up to that discarded part. The question is whether OMP's result is unchanged too: its error on V
is, by Eq. (*) of `features/compress.py`, ||y - V^T w||^2 = ||y_A - A^T w||^2 + ||E^T (1 - w)||^2, and the
second term holds the discarded parts of the chosen rows multiplied by their weights (about N / M each).

For vs_peers.py's NumPyro logistic and Poisson regression (D = 10, N = 5e5): V from `cj.coreset(...,
return_vectors=True)` (the route's default projection), its exact Gram in float64 and eigenvectors, then OMP at
M = 100 on V and on A_W for each W: OMP's relative error measured on V, the discarded energy and the target's
discarded part ||P_W^perp y|| / ||y||, the points shared with V's coreset, the solver's compiled time (median of
3 calls, V and the A_W alternating), then NUTS 2 x (400 + 400) on each coreset and `cj.certify` against all
rows, and the largest |difference| of each coreset posterior's means from V's coreset's, in pooled sd.

    python benchmarks/investigations/omp_low_rank.py [--trials 1]
Writes results/omp_low_rank.json.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [os.path.dirname(HERE), HERE, os.path.join(HERE, "investigations")]

import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

PROBLEMS = ("logistic10", "poisson10")
N, M = 500_000, 100
WIDTHS = (80, 96, 112, 128)  # of J = 160; J itself is V
QUICK = {"problems": ("logistic10",), "N": 5_000, "M": 20, "widths": (16,)}
DRAWS = {"num_samples": 400, "num_warmup": 400, "num_chains": 2}
REPEATS = 3


def _factors(Vd: np.ndarray, y: np.ndarray, widths) -> tuple[dict, dict]:
    """{W: A_W (float32)} and {W: (relative discarded energy, relative target tail)} from the exact Gram of
    V (`Vd`, float64) and its target y = sum_n v_n."""
    U = np.linalg.eigh(Vd.T @ Vd)[1][:, ::-1]
    total = float(np.sum(Vd * Vd))
    A, stats = {}, {}
    for w in widths:
        a = Vd @ U[:, :w]
        stats[w] = (float(np.sqrt(max(total - np.sum(a * a), 0.0) / total)),
                    float(np.linalg.norm(U[:, w:].T @ y) / np.linalg.norm(y)))
        A[w] = a.astype(np.float32)
    return A, stats


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__)
    import jax
    import jax.numpy as jnp
    import certify_precision

    cfg = dict(QUICK) if args.quick else {"problems": PROBLEMS, "N": N, "M": M, "widths": WIDTHS}
    trials = 1 if args.quick else (args.trials or 1)
    stem = common.stem("omp_low_rank", args.quick)
    result = {"settings": {"problems": list(cfg["problems"]), "N": cfg["N"], "M": cfg["M"],
                           "widths": list(cfg["widths"]), "trials": trials, "draws": DRAWS,
                           "repeats": REPEATS},
              "environment": common.environment(), "runs": []}
    m = cfg["M"]
    for label in cfg["problems"]:
        model, data = certify_precision._problem(label, cfg["N"])
        for trial in range(trials):
            key = jax.random.key(trial)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, V = cj.coreset(model, data, m, "omp", key=key, return_vectors=True)
            V = np.asarray(V)
            Vd = V.astype(np.float64)
            y = Vd.sum(0)
            j = V.shape[1]
            A, stats = _factors(Vd, y, cfg["widths"])
            inputs = {j: jnp.asarray(V), **{w: jnp.asarray(a) for w, a in A.items()}}
            stats[j] = (0.0, 0.0)
            for x in inputs.values():  # compile each width once
                jax.block_until_ready(cj.build(x, m, "omp", key=key, compress=False).weights)
            times = {w: [] for w in inputs}
            built = {}
            for rep in range(REPEATS):
                for w in (list(inputs) if rep % 2 == 0 else list(inputs)[::-1]):
                    t = time.perf_counter()
                    built[w] = cj.build(inputs[w], m, "omp", key=key, compress=False)
                    jax.block_until_ready(built[w].weights)
                    times[w].append(time.perf_counter() - t)
            base_points = None
            base_draws = None
            for w in inputs:  # V first
                cs = built[w]
                idx, wts = np.asarray(cs.indices), np.asarray(cs.weights, np.float64)
                live = set(idx[wts > 0].tolist())
                base_points = live if base_points is None else base_points
                error = float(np.linalg.norm(y - wts @ Vd[idx]) / np.linalg.norm(y))
                post = cj.sample(model, data, jax.random.fold_in(key, 1), weights=cs, warn=False, **DRAWS)
                cert = cj.certify(model, data, cs, post.samples)
                draws = np.asarray(post.samples, np.float64).reshape(-1, post.samples.shape[-1])
                row = {"problem": label, "N": cfg["N"], "M": m, "trial": trial, "width": w, "J": j,
                       "relative_discarded": stats[w][0], "target_tail": stats[w][1],
                       "relative_error": error, "build_s": float(np.median(times[w])),
                       "build_runs_s": times[w], "steps": int(cs.info["iterations"]),
                       "points": int(cs.num_points), "shared_points": len(live & base_points),
                       "kl": float(cert.kl), "kl_se": float(cert.kl_se), "khat": float(cert.khat),
                       "verdict": str(cert.verdict)}
                if base_draws is None:
                    base_draws = draws
                else:
                    pooled = np.sqrt(0.5 * (base_draws.var(0) + draws.var(0)))
                    row["max_z_between"] = float(np.max(np.abs(draws.mean(0) - base_draws.mean(0)) / pooled))
                result["runs"].append(row)
                print(f"{label} trial {trial} W={w}/{j}: discarded {row['relative_discarded']:.1e}, target tail "
                      f"{row['target_tail']:.1e}, error on V {error:.2e}, points {row['points']} "
                      f"(shared {row['shared_points']}), solve {row['build_s']:.2f} s, KL {row['kl']:.1e} "
                      f"({row['verdict']})", flush=True)
                common.write_json(common.jsonable(result), args.out, stem)
    return result


if __name__ == "__main__":
    main()
