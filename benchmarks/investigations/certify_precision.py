"""`cj.certify(..., precision=...)`: what float32 costs in accuracy and saves in time, at large N on the CPU.

For vs_peers.py's logistic and Poisson regression (D = 10, NumPyro models through `cj.from_numpyro`) at N rows:
an OMP coreset (M = 100, 100,000 candidate rows), NUTS on it (2 chains x (400 + 400), as vs_peers' route),
then `cj.certify` with precision "float64" (the default) and "float32", each called twice (the second call
timed, compiled). Recorded per precision: the second call's seconds, the KL estimate, k-hat and verdict; and
the error of float32's log ratios r_s against float64's (both centred): its sd over the draws and its
largest value, next to the spread (sd) of float64's r_s, the signal that the KL estimate reads.

    python benchmarks/investigations/certify_precision.py [--n 1000000] [--models logistic10 poisson10]
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


def one(label: str, n: int) -> dict:
    kind, d = vs_peers.MODELS[label]
    scope: dict = {}
    exec(vs_peers.MODEL_CODE, scope)
    X, y, _ = vs_peers.make_data(kind, d, n)
    model, data = cj.from_numpyro(scope[kind], jax.device_put(X), jax.device_put(y))
    key = jax.random.key(0)
    cs = cj.coreset(model, data, size=M, method="omp", key=key, candidate_rows=min(CANDIDATES, n))
    post = cj.sample(model, data, key, weights=cs, num_samples=400, num_warmup=400, num_chains=2, warn=False)
    out = {"model": label, "N": n, "M": M, "points": int(cs.num_points)}
    certs = {}
    for precision in ("float64", "float32"):
        cj.certify(model, data, cs, post.samples, precision=precision)
        t = time.perf_counter()
        cert = cj.certify(model, data, cs, post.samples, precision=precision)
        certs[precision] = cert
        out[precision] = {"seconds": time.perf_counter() - t, "kl": float(cert.kl), "kl_se": float(cert.kl_se),
                          "khat": float(cert.khat), "verdict": cert.verdict}
    r64 = np.asarray(certs["float64"].log_ratio, np.float64)
    err = np.asarray(certs["float32"].log_ratio, np.float64) - r64
    err -= err.mean()
    out.update(r_sd=float(np.std(r64)), error_sd=float(np.std(err)), error_max=float(np.max(np.abs(err))),
               speedup=out["float64"]["seconds"] / out["float32"]["seconds"])
    print(f"{label} N={n}: float64 {out['float64']['seconds']:.2f} s KL {out['float64']['kl']:.3g}; float32 "
          f"{out['float32']['seconds']:.2f} s KL {out['float32']['kl']:.3g}; r sd {out['r_sd']:.3g}, float32 error "
          f"sd {out['error_sd']:.3g} (max {out['error_max']:.3g})", flush=True)
    return out


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--n", type=int, default=1_000_000)
        p.add_argument("--models", nargs="+", default=["logistic10", "poisson10"], choices=list(vs_peers.MODELS))

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    warnings.simplefilter("ignore")
    rows = [one(label, 20_000 if args.quick else args.n) for label in args.models]
    result = {"environment": common.environment(), "rows": rows}
    common.write_json(result, args.out, common.stem("certify_precision", args.quick))
    return result


if __name__ == "__main__":
    main()
