"""Does a projection dimension J that grows with D rescue OMP coresets at D = 50 (issue 36)?

At D = 50 and the default J = 500, OMP stopped at 500 points at every size, and NUTS on the coreset missed
the full-data posterior (vs_peers_d50.json: max |z| 0.5 logistic, 2.7 Poisson, against NUTS's own 0.12).
A greedy solver's non-negative least-squares fit on J features keeps at most about J points, and a quadratic
model of the log-likelihood in D parameters has D (D + 3) / 2 coefficients, so J = 500 may be too few at D
= 50 (1,325). This measures it: vs_peers.py's synthetic logistic and Poisson regression at D = 50, N rows,
OMP at sizes M and projection dimensions J, each then NUTS on the coreset (2 chains x (500 + 500)) and
`cj.certify`; quality against full-data NUTS on the same rows (2 x (500 + 500)): max |z| of the posterior
mean, and the chains' own chain-against-chain z as the noise level. Recorded per cell: construction seconds
(first call, compilation included), points, relative error on the features, certificate KL and k-hat, max |z|.

    python benchmarks/investigations/d50_features.py --n 20000 --sizes 250 500 750 --features 500 1325 2650
Writes benchmarks/results/d50_features<tag>.json after every cell.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import vs_peers  # noqa: E402

PROBLEMS = ("logistic50", "poisson50")
DRAWS = {"num_samples": 500, "num_warmup": 500, "num_chains": 2}
QUICK = {"problems": ("logistic50",), "n": 1500, "sizes": (60,), "features": (60, 120)}


def problem(name: str, n: int):
    kind, d = vs_peers.MODELS[name]
    X, y, _ = vs_peers.make_data(kind, d, n)
    model = cj.models.logistic_regression() if kind == "logistic" else cj.models.poisson_regression()
    target = jnp.asarray(2 * y - 1) if kind == "logistic" else jnp.asarray(y)  # the built-in models' labels
    return model, (jnp.asarray(X), target)


def max_z(draws, ref) -> float:
    flat = np.asarray(draws).reshape(-1, np.shape(draws)[-1])
    return float(np.max(np.abs(flat.mean(0) - ref["mean"]) / ref["sd"]))


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
        p.add_argument("--n", type=int, default=20_000)
        p.add_argument("--sizes", nargs="+", type=int, default=[250, 500, 750])
        p.add_argument("--features", nargs="+", type=int, default=[500, 1325, 2650])
        p.add_argument("--cells", nargs="+", default=None, metavar="J:M",
                       help="these (J, M) pairs instead of every J of --features with every M of --sizes")
        p.add_argument("--tag", default="", help="suffix of the results file's name")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    cfg = dict(QUICK) if args.quick else {"problems": args.problems, "n": args.n, "sizes": args.sizes,
                                          "features": args.features}
    pairs = [(j, m) for j in cfg["features"] for m in cfg["sizes"]]
    if args.cells and not args.quick:
        pairs = [tuple(int(v) for v in c.split(":")) for c in args.cells]
    cfg["cells"] = [list(p) for p in pairs]
    draws = dict(DRAWS, num_samples=100, num_warmup=100) if args.quick else DRAWS
    result = {"settings": {**{k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}, "draws": draws},
              "cells": [], "references": {}, "environment": common.environment()}
    stem = common.stem("d50_features" + args.tag, args.quick)
    warnings.simplefilter("ignore")
    for name in cfg["problems"]:
        model, data = problem(name, cfg["n"])
        t = time.perf_counter()
        full = cj.sample(model, data, jax.random.key(0), warn=False, **draws)
        chains = np.asarray(full.samples)
        pooled = chains.reshape(-1, chains.shape[-1])
        ref = {"mean": pooled.mean(0), "sd": pooled.std(0)}
        result["references"][name] = {
            "seconds": time.perf_counter() - t,
            "chain_z": float(np.max(np.abs(chains[0].mean(0) - chains[1].mean(0)) / ref["sd"]))}
        print(f"{name}: full NUTS {result['references'][name]['seconds']:.0f} s, chain z "
              f"{result['references'][name]['chain_z']:.3f}", flush=True)
        for j, m in pairs:
            key = jax.random.key(1)
            t = time.perf_counter()
            cs = cj.coreset(model, data, size=m, method="omp", key=key, num_features=j)
            jax.block_until_ready(cs.weights)
            build_s = time.perf_counter() - t
            post = cj.sample(model, data, jax.random.key(2), weights=cs, warn=False, **draws)
            cert = cj.certify(model, data, cs, post.samples)
            cell = {"problem": name, "N": cfg["n"], "J": j, "M": m, "build_s": build_s,
                    "points": int(cs.num_points), "relative_error": float(cs.info.get("relative_error", np.nan)),
                    "kl": float(cert.kl), "khat": float(cert.khat), "verdict": str(cert.verdict),
                    "max_z": max_z(post.samples, ref)}
            result["cells"].append(cell)
            print(f"{name} J={j} M={m}: {build_s:.0f} s, {cell['points']} points, rel err "
                  f"{cell['relative_error']:.2g}, KL {cell['kl']:.3g} ({cell['verdict']}), max |z| "
                  f"{cell['max_z']:.3f}", flush=True)
            common.write_json(common.jsonable(result), args.out, stem)
    common.write_json(common.jsonable(result), args.out, stem)
    return result


if __name__ == "__main__":
    main()
