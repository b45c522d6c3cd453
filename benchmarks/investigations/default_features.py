"""The default projection dimension J: a fixed 500 against J grown from D and M (issue 36, part 2).

`cj.coreset`'s projection dimension was J = 500 whatever the model. Every solver pass, V's memory and the
projection are linear in J, and at N = 1e6 (D = 10) OMP's 200 passes over a 1e6 x 500 V took 7-8 s of a
cold route of 20 s. The rule's floor is `cj.features.projection.auto_num_features(D, M)` (no rows given):
J = min(500, max(64, 16 D, M)). It differs from 500 only where 16 D < 500 and M < 500, so this runs the suite
of benchmarks/models.py on its problems with D < 32 (Gaussian location D = 20 in closed form, the NumPyro
linear regression D = 12, ds1 D = 10, BINARY10 D = 11, the real biketrips_large D = 9 and
airportdelays_large, the spike and slab with its Gibbs kernel) with both J, for OMP and A-IHT II at M = 100
and 300 and GIGA at M = 100, with models.py's own metrics against its full-data references: z2 (mean squared
z of the coreset posterior mean; its noise floor is the reference's own), W1 / floor, the two-moment KL, and
the certificate's KL. (phishing, D = 68, and Bradley-Terry, D = 50, keep J = 500 under the rule.)

This part measures the floor, which the default (`auto_num_features(D, M, N)`, for OMP only) reaches only
beyond its budget (V of more than 2^26 entries, N > 134,217 at J = 500): below it, which covers the whole
suite and every shared real file, J stays 500. It chose both: small N keeps 500 (OMP's certificate KL rose
up to 4x at the floor), and only OMP shrinks J (A-IHT II fell apart at the floor).

`--large`: where the rule does shrink J, at N = 10^6: vs_peers.py's logistic and Poisson regression (D = 10,
NumPyro models) and the real biketrips_large (D = 9) and airportdelays_large (D = 16) tiled to N rows
(investigations/certify_precision.py's problems), OMP at M = 100 with J = 500 and the rule's J, then NUTS on
the coreset (2 x (400 + 400), vs_peers' route) and `cj.certify` against all N rows: the certificate's KL and
its standard error, k-hat, points, relative error, the construction's seconds (its second call: compiled),
and the largest |difference| of the two coreset posteriors' means in their pooled sd (z between J's).
No full-data reference exists at this N; the certificate weighs the coreset posterior against all rows.

    python benchmarks/investigations/default_features.py [--problems ...] [--trials 3]
    python benchmarks/investigations/default_features.py --large [--trials 2]
Writes benchmarks/results/default_features.json (and default_features_large.json) after every cell
(resumable: cells already there are kept).
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "investigations"))

import json  # noqa: E402

import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.core.model import initial_theta  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

PROBLEMS = ("gaussian_location", "linear_regression", "ds1", "logistic_binary10", "biketrips_large",
            "airportdelays_large", "spike_and_slab")
CELLS = (("omp", 100), ("omp", 300), ("iht2", 100), ("iht2", 300), ("giga", 100))
QUICK = {"problems": ("ds1",), "cells": (("omp", 100),), "trials": 1}


def dimension(problem) -> int:
    theta = initial_theta(problem["model"], problem["data"])
    return int(theta.shape[-1])


def summarise(rows: list) -> list:
    """Per (problem, method, M): medians over trials of each metric, J = 500 against the rule."""
    out = []
    keys = sorted({(r["problem"], r["method"], r["M"]) for r in rows})
    for problem, method, m in keys:
        both = {}
        for variant in ("J500", "auto"):
            sel = [r for r in rows if (r["problem"], r["method"], r["M"], r["variant"]) == (problem, method, m,
                                                                                             variant)]
            if sel:
                both[variant] = {k: float(np.median([r[k] for r in sel if k in r] or [np.nan]))
                                 for k in ("z2", "w1_floor", "kl2", "cert_kl", "points", "construct_s", "J")}
                both[variant]["trials"] = len(sel)
        if len(both) == 2:
            out.append({"problem": problem, "method": method, "M": m, "z2_floor": rows_floor(rows, problem),
                        **{f"{v}_{k}": val for v, d in both.items() for k, val in d.items()}})
    return out


def rows_floor(rows, problem):
    return next(r["z2_floor"] for r in rows if r["problem"] == problem)


def markdown(table: list) -> str:
    lines = ["| problem | method | M | J (rule) | z2 J=500 | z2 rule | z2 floor | W1/floor 500 / rule | "
             "certificate KL 500 / rule | points 500 / rule | build s 500 / rule |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        lines.append(
            f"| {t['problem']} | {t['method']} | {t['M']} | {int(t['auto_J'])} | {t['J500_z2']:.2e} | "
            f"{t['auto_z2']:.2e} | {t['z2_floor']:.1e} | {t['J500_w1_floor']:.2f} / {t['auto_w1_floor']:.2f} | "
            f"{t['J500_cert_kl']:.1e} / {t['auto_cert_kl']:.1e} | {t['J500_points']:.0f} / {t['auto_points']:.0f} | "
            f"{t['J500_construct_s']:.1f} / {t['auto_construct_s']:.1f} |")
    return "\n".join(lines)


LARGE = ("logistic10", "poisson10", "biketrips_large", "airportdelays_large")
LARGE_N, LARGE_M = 1_000_000, 100
DRAWS = {"num_samples": 400, "num_warmup": 400, "num_chains": 2}


def large(args) -> dict:
    """The `--large` part (module docstring)."""
    import jax
    import certify_precision

    n = 20_000 if args.quick else LARGE_N
    problems = ("logistic10",) if args.quick else LARGE
    trials = 1 if args.quick else (args.trials or 2)
    stem = common.stem("default_features_large", args.quick)
    result = {"settings": {"problems": list(problems), "N": n, "M": LARGE_M, "trials": trials, "draws": DRAWS,
                           "rule": "J = min(500, max(64, 16 D, M, 2^26 // N))"},
              "environment": common.environment(), "runs": []}
    for label in problems:
        made = certify_precision._problem(label, n)
        if made is None:
            continue
        model, data = made
        d = int(jax.eval_shape(model.init_params, data).shape[-1]) if model.init_params is not None \
            else int(model.dim)
        means = {}
        for trial in range(trials):
            key = jax.random.key(trial)
            for variant in ("J500", "rule"):
                j = 500 if variant == "J500" else cj.features.projection.auto_num_features(d, LARGE_M, n)
                cs = cj.coreset(model, data, size=LARGE_M, method="omp", key=key, num_features=j)
                jax.block_until_ready(cs.weights)
                t = time.perf_counter()
                cs = cj.coreset(model, data, size=LARGE_M, method="omp", key=key, num_features=j)
                jax.block_until_ready(cs.weights)
                build_s = time.perf_counter() - t
                post = cj.sample(model, data, jax.random.fold_in(key, 1), weights=cs, warn=False, **DRAWS)
                cert = cj.certify(model, data, cs, post.samples)
                flat = np.asarray(post.samples, np.float64).reshape(-1, d)
                means[(trial, variant)] = (flat.mean(0), flat.std(0))
                row = {"problem": label, "N": n, "D": d, "trial": trial, "variant": variant, "J": j,
                       "build_s": build_s, "points": int(cs.num_points),
                       "relative_error": float(cs.info["relative_error"]), "kl": float(cert.kl),
                       "kl_se": float(cert.kl_se), "khat": float(cert.khat), "verdict": str(cert.verdict)}
                if variant == "rule":
                    (m0, s0), (m1, s1) = means[(trial, "J500")], means[(trial, "rule")]
                    row["max_z_between"] = float(np.max(np.abs(m1 - m0) / np.sqrt(0.5 * (s0 ** 2 + s1 ** 2))))
                result["runs"].append(row)
                print(f"{label} N={n} D={d} {variant} J={j} trial {trial}: KL {row['kl']:.2e} +- "
                      f"{row['kl_se']:.1e} ({row['verdict']}), points {row['points']}, build {build_s:.2f} s"
                      + (f", z between J's {row['max_z_between']:.3f}" if "max_z_between" in row else ""),
                      flush=True)
                common.write_json(common.jsonable(result), args.out, stem)
    return result


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(models.PROBLEMS))
        p.add_argument("--data-dir", default=common.DATA_DIR)
        p.add_argument("--large", action="store_true", help="the rule at N = 10^6 (module docstring)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    if args.large:
        return large(args)
    cfg = dict(QUICK) if args.quick else {"problems": args.problems, "cells": CELLS, "trials": args.trials or 3}
    stem = common.stem("default_features", args.quick)
    path = os.path.join(args.out, stem + ".json")
    rows = []
    if os.path.exists(path) and not args.quick:
        rows = json.load(open(path)).get("runs", [])
    done = {(r["problem"], r["method"], r["M"], r["variant"], r["trial"]) for r in rows}
    result = {"settings": {"problems": list(cfg["problems"]), "cells": [list(c) for c in cfg["cells"]],
                           "trials": cfg["trials"], "rule": "J = min(500, max(64, 16 D, M))"},
              "environment": common.environment(), "runs": rows}
    for name in cfg["problems"]:
        if args.quick and not os.path.exists(os.path.join(args.data_dir, name + ".npz")):
            continue
        problem = models.load_problem(name, args.data_dir)
        ref = models.reference(name, problem)
        d = dimension(problem)
        for trial in range(cfg["trials"]):
            for method, m in cfg["cells"]:
                if m >= models.n_rows(problem):
                    continue
                for variant in ("J500", "auto"):
                    if (name, method, m, variant, trial) in done:
                        continue
                    j = 500 if variant == "J500" else cj.features.projection.auto_num_features(d, m)
                    t = time.perf_counter()
                    row = models.run_one(name, problem, ref, method, m, trial, {"num_features": j}, method)
                    row.update(variant=variant, J=j, D=d, z2_floor=ref["z2_floor"],
                               cell_s=time.perf_counter() - t)
                    rows.append(row)
                    print(f"{name} D={d} {method} M={m} {variant} J={j} trial {trial}: z2 {row['z2']:.2e} "
                          f"(floor {ref['z2_floor']:.1e}) cert KL {row.get('cert_kl', np.nan):.2e} points "
                          f"{row['points']} build {row['construct_s']:.1f} s", flush=True)
                    result["table"] = summarise(rows)
                    common.write_json(common.jsonable(result), args.out, stem)
    return common.write_table(result, rows, summarise, markdown, args.out, stem)


if __name__ == "__main__":
    main()
