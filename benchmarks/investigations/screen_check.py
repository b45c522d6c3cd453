"""The automatic size's screening certificate (`certification.screen`) against the full pass, at large N.

Part 1, per size: for OMP coresets of M = 16, 32, 64 and 128 points, NUTS draws of each coreset posterior
(2 chains x (500 + 500), as the search), then `cj.certify` (its pass over every row, precision "auto" with
the screen off) and the screen (16,384 rows, second-order Taylor control variate) on the same draws.
Recorded: both KL estimates, the
screen's error against the full pass (sd over the draws of the centred difference of r) next to the error
the screen estimates from the spread of its four groups, whether the screen would decide the size at
tol = 1, 0.1 and 0.01 (`auto_size.decisive`) and, where it decides, whether it decides as the full pass
does; and the seconds of each (second calls, compiled).

Part 2, the whole search: `cj.coreset(model, data, key=key, tol=0.1)` with the screen and with full passes only
(`screen.ENABLED`), each called twice in one process, alternating; the second calls are timed. Recorded: the sizes
tried, the size returned and its certificate's KL under each, and the seconds. (Not for logistic regression
with D = 50, whose search runs OMP past 1,000 points: minutes per search.)

Problems at N rows (default 500,000):
- vs_peers.py's logistic and Poisson regression (D = 10) and logistic regression with D = 50, NumPyro models
  through `cj.from_numpyro`;
- the shared real files biketrips_large (D = 9) and airportdelays_large (D = 16) with the built-in Poisson
  regression, tiled to N rows (every row repeated about N / N_file times). Skipped where absent.

    python benchmarks/investigations/screen_check.py [--n 500000] [--models ...]
Writes results/screen_check.json.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE), os.path.join(HERE, "investigations")]

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import vs_peers  # noqa: E402
from certify_precision import REAL, problem_or_skip  # noqa: E402
from coresets_jax.certification import screen as _screen  # noqa: E402
from coresets_jax.construct import auto_size  # noqa: E402

SIZES = (16, 32, 64, 128)
TOLS = (1.0, 0.1, 0.01)
SAMPLING = auto_size.SAMPLING
# Part 2 skips these: at D = 50 the search runs OMP past 1,000 points on 500 features (minutes per search at
# N = 5e5, four searches); part 1 screens its sizes all the same.
NO_SEARCH = ("logistic50",)


def _timed(fn):
    fn()
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def per_size(model, data, m: int, key) -> dict:
    cs = cj.coreset(model, data, size=m, method="omp", key=key)
    post = cj.sample(model, data, jax.random.fold_in(key, m), weights=cs, warn=False, **SAMPLING)
    _screen.ENABLED = False  # the certificate's own pass over every row, not its audited screen
    full, full_s = _timed(lambda: cj.certify(model, data, cs, post.samples))
    _screen.ENABLED = True
    (cert, noise), screen_s = _timed(lambda: _screen.screened_certificate(model, data, cs, post.samples, seed=m))
    err = np.asarray(cert.log_ratio) - np.asarray(full.log_ratio)
    err -= err.mean()
    row = {"size": m, "points": int(cs.num_points), "full_kl": float(full.kl), "full_kl_se": float(full.kl_se),
           "full_verdict": full.verdict, "full_precision": full.precision, "screen_kl": float(cert.kl),
           "screen_kl_se": float(cert.kl_se), "screen_verdict": cert.verdict, "noise_estimated": noise,
           "noise_true": float(np.std(err)), "error_max": float(np.max(np.abs(err))),
           "r_sd": float(np.std(np.asarray(full.log_ratio))), "full_s": full_s, "screen_s": screen_s}
    for tol in TOLS:
        decides = auto_size.decisive(cert, noise, tol)
        row[f"decides_at_{tol:g}"] = bool(decides)
        row[f"agrees_at_{tol:g}"] = (not decides) or auto_size.passes(cert, tol) == auto_size.passes(full, tol)
    return row


def search(model, data, key) -> dict:
    out = {}
    for rep in range(2):
        for on in (True, False):
            _screen.ENABLED = on
            t = time.perf_counter()
            cs = cj.coreset(model, data, key=key, tol=0.1)
            seconds = time.perf_counter() - t
            if rep == 1:
                out["screened" if on else "full"] = {
                    "seconds": seconds, "sizes": [p["size"] for p in cs.info["path"]],
                    "screened_sizes": [p["size"] for p in cs.info["path"] if p["screened"]],
                    "returned": int(cs.capacity), "points": int(cs.num_points), "kl": float(cs.certificate.kl),
                    "verdict": cs.certificate.verdict, "indices": np.asarray(cs.indices).tolist()}
    _screen.ENABLED = True
    same = out["screened"]["indices"] == out["full"]["indices"]
    for v in out.values():
        del v["indices"]
    out.update(same_coreset=same, ratio=out["screened"]["seconds"] / out["full"]["seconds"])
    return out


def one(label: str, n: int, sizes) -> dict:
    problem, skipped = problem_or_skip(label, n)
    if skipped:
        return skipped
    model, data = problem
    key = jax.random.key(0)
    rows = []
    for m in sizes:
        rows.append(per_size(model, data, m, key))
        r = rows[-1]
        print(f"{label} N={n} M={m}: full KL {r['full_kl']:.4g} ({r['full_s']:.2f} s) screen {r['screen_kl']:.4g} "
              f"({r['screen_s']:.2f} s); error sd {r['noise_true']:.2g}, estimated {r['noise_estimated']:.2g}; "
              f"decides/agrees at 0.1: {r['decides_at_0.1']}/{r['agrees_at_0.1']}", flush=True)
    if label in NO_SEARCH:
        return {"model": label, "N": n, "sizes": rows, "search": None}
    whole = search(model, data, key)
    print(f"{label} N={n} search: screened {whole['screened']['seconds']:.2f} s {whole['screened']['sizes']} -> "
          f"{whole['screened']['returned']}; full {whole['full']['seconds']:.2f} s {whole['full']['sizes']} -> "
          f"{whole['full']['returned']}; same coreset {whole['same_coreset']}", flush=True)
    return {"model": label, "N": n, "sizes": rows, "search": whole}


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--n", type=int, default=500_000)
        p.add_argument("--models", nargs="+", default=["logistic10", "poisson10", "logistic50", *REAL],
                       choices=list(vs_peers.MODELS) + list(REAL))

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    warnings.simplefilter("ignore")
    n = _screen.SCREEN_MIN_ROWS if args.quick else args.n
    models = ["logistic10"] if args.quick else args.models
    sizes = SIZES[:2] if args.quick else SIZES
    cells = [one(label, n, sizes) for label in models]
    done = [c for c in cells if "skipped" not in c and c["search"] is not None]
    rows = [r for c in cells if "skipped" not in c for r in c["sizes"]]
    summary = {
        "per_size": len(rows),
        **{f"decided_at_{t:g}": f"{sum(r[f'decides_at_{t:g}'] for r in rows)}/{len(rows)}" for t in TOLS},
        **{f"agreed_at_{t:g}": f"{sum(r[f'agrees_at_{t:g}'] for r in rows)}/{len(rows)}" for t in TOLS},
        "error_ratio_range": [min(r["noise_true"] / max(r["noise_estimated"], 1e-300) for r in rows),
                              max(r["noise_true"] / max(r["noise_estimated"], 1e-300) for r in rows)] if rows else None,
        "median_speedup": float(np.median([r["full_s"] / r["screen_s"] for r in rows])) if rows else None,
        "searches_same_coreset": f"{sum(c['search']['same_coreset'] for c in done)}/{len(done)}",
        "search_ratio_median": float(np.median([c["search"]["ratio"] for c in done])) if done else None,
    }
    print(summary, flush=True)
    result = {"environment": common.environment(), "settings": {"sizes": list(sizes), "tols": list(TOLS),
                                                               "screen_rows": _screen.SCREEN_ROWS,
                                                               "sampling": SAMPLING},
              "summary": summary, "cells": cells}
    common.write_json(result, args.out, common.stem("screen_check", args.quick))
    return result


if __name__ == "__main__":
    main()
