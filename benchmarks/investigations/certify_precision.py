"""`cj.certify(..., precision=...)`: what float32 costs in accuracy and saves in time, at large N on the CPU,
and what "auto" (the default: float32 audited against float64 at 32 draws) chooses.

Problems at N rows:
- vs_peers.py's logistic and Poisson regression (D = 10, NumPyro models through `cj.from_numpyro`);
- the shared real files biketrips_large (N = 15,641, D = 9) and airportdelays_large (6,822, D = 16) with the
  built-in Poisson regression, each tiled to N rows: every row repeated about N / N_file times, the case where
  float32 rounding adds up linearly in N (passes.py's module docstring). Skipped where the files are absent.
For each: an OMP coreset (M = 100, 100,000 candidate rows), NUTS on it (2 chains x (400 + 400), as vs_peers'
route), then `cj.certify` with precision "float64", "float32" and "auto", each called twice (the second call
timed, compiled). Recorded per precision: the second call's seconds, the KL estimate, k-hat and verdict, and
for "auto" the precision it used and its estimated error bound; and the error of float32's and auto's log
ratios r_s against float64's (all centred): its sd over the draws and its largest value, next to the spread
(sd) of float64's r_s, the signal that the KL estimate reads.

    python benchmarks/investigations/certify_precision.py [--n 1000000] [--models logistic10 poisson10 \
        biketrips_large airportdelays_large]
Writes results/certify_precision.json.
"""

from __future__ import annotations

import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import vs_peers  # noqa: E402

M, CANDIDATES = 100, 100_000
REAL = ("biketrips_large", "airportdelays_large")  # tiled to N rows, with the built-in Poisson regression
PRECISIONS = ("float64", "float32", "auto")


def _problem(label: str, n: int):
    """(model, data) of `label` at n rows, or None where a real file is absent."""
    if label in REAL:
        path = common.data_path(label + ".npz")
        if path is None:
            return None
        ds = cj.load_npz(path)
        X, y = np.asarray(ds.X, np.float32), np.asarray(ds.y, np.float32)
        tiles = -(-n // X.shape[0])
        X, y = np.tile(X, (tiles, 1))[:n], np.tile(y, tiles)[:n]
        return cj.models.poisson_regression(), (jax.device_put(X), jax.device_put(y))
    kind, d = vs_peers.MODELS[label]
    scope: dict = {}
    exec(vs_peers.MODEL_CODE, scope)
    X, y, _ = vs_peers.make_data(kind, d, n)
    return cj.from_numpyro(scope[kind], jax.device_put(X), jax.device_put(y))


def problem_or_skip(label: str, n: int):
    """((model, data), None), or (None, the row to record) where a real file is absent."""
    problem = _problem(label, n)
    if problem is None:
        print(f"{label}: its data file is absent, skipped", flush=True)
        return None, {"model": label, "N": n, "skipped": "data file absent"}
    return problem, None


def one(label: str, n: int) -> dict:
    problem, skipped = problem_or_skip(label, n)
    if skipped:
        return skipped
    model, data = problem
    key = jax.random.key(0)
    cs = cj.coreset(model, data, size=M, method="omp", key=key, candidate_rows=min(CANDIDATES, n))
    post = cj.sample(model, data, key, weights=cs, num_samples=400, num_warmup=400, num_chains=2, warn=False)
    out = {"model": label, "N": n, "M": M, "points": int(cs.num_points)}
    certs = {}
    for precision in PRECISIONS:
        cj.certify(model, data, cs, post.samples, precision=precision)
        t = time.perf_counter()
        cert = cj.certify(model, data, cs, post.samples, precision=precision)
        certs[precision] = cert
        out[precision] = {"seconds": time.perf_counter() - t, "kl": float(cert.kl), "kl_se": float(cert.kl_se),
                          "khat": float(cert.khat), "verdict": cert.verdict, "used": cert.precision,
                          "error_bound": cert.precision_error, "note": cert.precision_note}
    r64 = np.asarray(certs["float64"].log_ratio, np.float64)
    out["r_sd"] = float(np.std(r64))
    for precision in PRECISIONS[1:]:
        err = np.asarray(certs[precision].log_ratio, np.float64) - r64
        err -= err.mean()
        out[precision].update(error_sd=float(np.std(err)), error_max=float(np.max(np.abs(err))),
                              speedup=out["float64"]["seconds"] / out[precision]["seconds"])
    # the float32 columns under their earlier names, for the docs' table
    out.update(error_sd=out["float32"]["error_sd"], error_max=out["float32"]["error_max"],
               speedup=out["float32"]["speedup"])
    a = out["auto"]
    print(f"{label} N={n}: float64 {out['float64']['seconds']:.2f} s KL {out['float64']['kl']:.3g}; float32 "
          f"{out['float32']['seconds']:.2f} s KL {out['float32']['kl']:.3g}, error sd {out['error_sd']:.3g} (max "
          f"{out['error_max']:.3g}); auto {a['seconds']:.2f} s ({a['used']}, bound {a['error_bound']}) KL "
          f"{a['kl']:.3g}, error max {a['error_max']:.3g}; r sd {out['r_sd']:.3g}", flush=True)
    return out


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--n", type=int, default=1_000_000)
        p.add_argument("--models", nargs="+", default=["logistic10", "poisson10", *REAL],
                       choices=list(vs_peers.MODELS) + list(REAL))

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    warnings.simplefilter("ignore")
    rows = [one(label, 20_000 if args.quick else args.n) for label in args.models]
    result = {"environment": common.environment(), "rows": rows}
    common.write_json(result, args.out, common.stem("certify_precision", args.quick))
    return result


if __name__ == "__main__":
    main()
