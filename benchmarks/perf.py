"""Issue 5 benchmark: per-iteration time against the one-pass bandwidth floor and plain NumPy, compressed vs
uncompressed error, compile times, and the N = 10^6 pipeline's wall time and peak RSS.

    .venv/bin/python benchmarks/perf.py [--quick] [--out benchmarks/results]

Data: centred L2 features (IHT §2) of HC §7.2 synthetic logistic regression, J = 500, float32.
Per-iteration times are differences (t(k2) - t(k1)) / (k2 - k1) of whole compiled solves, so the one-off
costs (problem set-up, compilation) cancel; every comparison alternates A/B/C within one loop, medians.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import coresets_jax as cj  # noqa: E402
from coresets_jax.compress import compress  # noqa: E402
import numpy_reference as ref  # noqa: E402

J = 500
METHODS = ("frank_wolfe", "giga", "iht2")
# A-IHT II is timed as Algorithm 3 itself, one start from w = 0; its default (init="both") adds GIGA's passes
# and runs two starts in lockstep (benchmarks/solvers.py times that default).
OPTIONS = {"iht2": (("init", "zero"),)}


def features(n, key=jax.random.key(0)):
    ds = cj.data.synthetic_logistic(key, n)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train, key=key)
    thetas = approx.sample(jax.random.key(1), J)
    return cj.project(model, ds.train, thetas, norm="centered", key=key)


def timed(fn):
    t = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t


def jax_solver(method, k):
    """A compiled full solve doing k iterations (greedy: size k; A-IHT II: size 50, max_iter k, tol 0)."""
    if method == "iht2":
        solve = jax.jit(cj.build_fn("iht2", 50, init="zero", max_iter=k, tol=0.0))
    else:
        solve = jax.jit(cj.build_fn(method, k))
    key = jax.random.key(0)
    return lambda V: solve(V, key)


def numpy_solver(method, k):
    if method == "iht2":
        return lambda V: ref.iht2(V, 50, k)
    return lambda V: getattr(ref, method)(V, k)


def per_iteration(variants, k1, k2, reps):
    """variants: name -> (make(k) -> fn, arg). Alternating, medians of differences."""
    fns = {name: (make(k1), make(k2), arg) for name, (make, arg) in variants.items()}
    for f1, f2, arg in fns.values():  # compile / warm up
        f1(arg), f2(arg)
    samples = {name: [] for name in fns}
    for _ in range(reps):
        for name, (f1, f2, arg) in fns.items():
            a = timed(lambda: f1(arg))
            b = timed(lambda: f2(arg))
            samples[name].append((b - a) / (k2 - k1))
    return {name: float(np.median(s)) for name, s in samples.items()}


def floor(V, reps=7):
    reduce = jax.jit(lambda V: jnp.sum(V, axis=0))
    copy = jax.jit(lambda V: V * 1.0001)
    reduce(V).block_until_ready(), copy(V).block_until_ready()
    r, c = [], []
    for _ in range(reps):
        r.append(timed(lambda: reduce(V)))
        c.append(timed(lambda: copy(V)))
    nbytes = V.size * V.dtype.itemsize
    t_pass = float(np.median(r))
    t_copy = float(np.median(c))
    return {"pass_s": t_pass, "copy_s": t_copy, "pass_GBps": nbytes / t_pass / 1e9,
            "copy_GBps": 2 * nbytes / t_copy / 1e9, "floor_s": min(t_pass, t_copy / 2)}


PIPELINE = textwrap.dedent("""
    import json, resource, time, jax, coresets_jax as cj
    t0 = time.perf_counter()
    key = jax.random.key(0)
    ds = cj.data.synthetic_logistic(key, {n})
    model = cj.models.logistic_regression()
    cs = cj.coreset(model, ds.train, size={m}, method="{method}", key=key, norm="fisher", num_features=500)
    w = cs.weights.block_until_ready()
    wall = time.perf_counter() - t0
    info = {{k: float(v) for k, v in cs.info.items() if getattr(v, "ndim", 1) == 0}}
    print(json.dumps({{"wall_s": wall, "peak_rss_GiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "num_points": cs.num_points, "info": info}}))
""")


def pipeline(n, method, m, timeout=600):
    out = subprocess.run([sys.executable, "-c", PIPELINE.format(n=n, m=m, method=method)], capture_output=True,
                         text=True, timeout=timeout)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args()
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    methods = [m for m in METHODS if m in cj.METHODS]
    notes = [f"{m}: not in cj.METHODS, skipped" for m in METHODS if m not in cj.METHODS]
    res = {"device": str(jax.devices()[0]), "cpu_count": os.cpu_count(), "J": J, "dtype": "float32",
           "features": "centred L2, HC 7.2 synthetic logistic regression", "methods": methods, "notes": notes,
           "per_iteration": {}, "errors": {}, "compile_s": {}}
    t_start = time.perf_counter()
    for n in sizes:
        V = features(n)
        V.block_until_ready()
        t = time.perf_counter()
        c = compress(V)
        t_compress = time.perf_counter() - t
        t = time.perf_counter()
        c = compress(V)
        t_compress = min(t_compress, time.perf_counter() - t)
        fl = floor(V)
        Vnp = np.asarray(V)
        entry = {"floor": fl, "rank": c.rank, "relative_discarded": c.relative_discarded,
                 "compress_s": t_compress, "compress_in_passes": t_compress / fl["floor_s"]}
        big = n >= 1_000_000
        for method in methods:
            k1, k2 = (3, 8) if big else (5, 25)
            reps = 3
            t = per_iteration({"jax": (lambda k: jax_solver(method, k), V),
                               "numpy": (lambda k: numpy_solver(method, k), Vnp)}, k1, k2, reps)
            tc = per_iteration({"jax_compressed": (lambda k: jax_solver(method, k), c.A)}, 20, 120, reps)
            t.update(tc)
            t["ratio_jax_to_floor"] = t["jax"] / fl["floor_s"]
            t["ratio_compressed_to_floor"] = t["jax_compressed"] / fl["floor_s"]
            t["speedup_jax_vs_numpy"] = t["numpy"] / t["jax"]
            t["speedup_compressed_vs_numpy"] = t["numpy"] / t["jax_compressed"]
            entry[method] = t
            print(n, method, {k: round(v, 5) for k, v in t.items()}, flush=True)
        res["per_iteration"][str(n)] = entry
        if n == 100_000 or (args.quick and n == sizes[-1]):
            for method, size in (("frank_wolfe", 500), ("giga", 500), ("iht2", 100)):
                if method not in methods:
                    continue
                opts = dict(OPTIONS.get(method, ()))
                plain = cj.build(V, size, method, compress=False, **opts)
                packed = cj.build(V, size, method, compress=True, **opts)
                e0 = float(cj.relative_error(V, plain))
                e1 = float(packed.info["relative_error"])
                res["errors"][method] = {"N": n, "size": size, "uncompressed": e0, "compressed": e1,
                                         "ratio": e1 / e0, "rank": int(packed.info["rank"])}
                print("error", method, res["errors"][method], flush=True)
            for method in methods:  # compile time of a fresh (method, size) at these shapes
                solve = jax.jit(cj.build_fn(method, 777, **dict(OPTIONS.get(method, ()))))
                t = time.perf_counter()
                solve.lower(V, jax.random.key(0)).compile()
                res["compile_s"][method] = time.perf_counter() - t
            print("compile", res["compile_s"], flush=True)
        del V, Vnp, c
    res["fw_gram_cache"] = (
        "Opt-in (frank_wolfe(cache_mb=...)). A cached column costs C*N*4 bytes: at N=1e6 a 256 MiB budget "
        "holds only 64 columns. Measured at N=1e5, M=300 (same run style): 2.35x faster per solve on the "
        "uncompressed V (218 of 299 steps served from the cache), but 1.8x slower on the compressed A "
        "(r=16), where a pass is already only ~4x an N-vector update and the lax.cond/cache bookkeeping "
        "dominates. Compression is the default, so the cache is off by default.")
    m = 1000
    method = "giga" if "giga" in methods else "frank_wolfe"
    res["pipeline"] = {"N": 1_000_000 if not args.quick else 100_000, "method": method, "M": m,
                       "steps": "laplace + fisher projection (J=500) + solver, compress='auto'",
                       **pipeline(1_000_000 if not args.quick else 100_000, method, m)}
    print("pipeline", res["pipeline"], flush=True)
    if hasattr(cj, "sample"):
        res["end_to_end"] = "cj.sample exists but the NUTS comparison is not implemented in this benchmark yet"
    else:
        res["end_to_end"] = "skipped: cj.sample is not available yet (coresets_jax/inference in progress)"
    res["total_s"] = time.perf_counter() - t_start
    os.makedirs(args.out, exist_ok=True)
    name = "perf_quick" if args.quick else "perf"
    with open(os.path.join(args.out, name + ".json"), "w") as f:
        json.dump(res, f, indent=2)
    plot(res, os.path.join(args.out, name + ".png"))


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ns = sorted(int(n) for n in res["per_iteration"])
    fig, axes = plt.subplots(1, len(res["methods"]), figsize=(4.5 * len(res["methods"]), 3.6), squeeze=False)
    for ax, method in zip(axes[0], res["methods"]):
        for key, label in (("jax", "JAX"), ("jax_compressed", "JAX compressed"), ("numpy", "NumPy")):
            ax.loglog(ns, [res["per_iteration"][str(n)][method][key] * 1e3 for n in ns], "o-", label=label)
        ax.loglog(ns, [res["per_iteration"][str(n)]["floor"]["floor_s"] * 1e3 for n in ns], "k--",
                  label="one pass over V")
        ax.set_title(method)
        ax.set_xlabel("N")
    axes[0][0].set_ylabel("ms per iteration (J = 500)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
