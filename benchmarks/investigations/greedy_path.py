"""The automatic size with OMP's greedy path against one OMP run per size (`cj.coreset(..., tol=...)`).

With OMP, `cj.coreset(model, data, key=key, tol=tol)` builds the sizes it can try up to 4 M_0 (16, 23, 32,
45, 64 for M_0 = 16) from one OMP run at 64 that keeps each smaller size's coreset (`solvers.omp`'s
`path_sizes`): one compilation and 64-odd OMP iterations, where one run per size compiles once per size and
iterates about 16 + 32 + 64 + 45 = 157 times on the usual path. `path_sizes=()` switches the greedy path off.

Both variants run in FRESH processes with empty compilation caches (JAX_COMPILATION_CACHE_DIR a new folder,
CORESETS_JAX_NO_CACHE=1), alternating within each repeat, on synthetic logistic regression (built-in model,
`cj.data.synthetic_binary`, D = 10 covariates plus the intercept), tol = 0.1, the default J = 500:
  first   the first call in the process (compilation included), with its XLA compilations (count, seconds);
  second  the same call again (compiled);
and the sizes tried, the chosen size and its certificate.

    python benchmarks/investigations/greedy_path.py [--sizes 200000 1000000] [--repeats 2]
    python benchmarks/investigations/greedy_path.py --quick          # N = 20,000, one repeat (a smoke run)
Writes results/greedy_path.json (greedy_path_quick.json with --quick).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path[:0] = [BENCH, os.path.dirname(BENCH)]
import common  # noqa: E402

D, TOL = 10, 0.1
VARIANTS = {"greedy_path": {}, "one_run_per_size": {"path_sizes": ()}}


def child_main(argv=None) -> None:
    """One variant at one N in this (fresh) process; prints a JSON line."""
    t_start = time.perf_counter()
    cfg = json.loads((argv or sys.argv[1:])[0])
    import warnings
    import jax
    import coresets_jax as cj
    from cold_start import LOG
    scope: dict = {}
    exec(LOG, scope)
    warnings.simplefilter("ignore")
    data = cj.data.synthetic_binary(jax.random.key(1), cfg["N"], D).train
    jax.block_until_ready(data)
    model = cj.models.logistic_regression()
    out = {"import_and_data_s": time.perf_counter() - t_start}
    import logging
    for rnd in ("first", "second"):
        scope["start_log"]()
        logging.getLogger("jax._src.interpreters.pxla").disabled = True  # its "Compiling ..." lines
        t = time.perf_counter()
        cs = cj.coreset(model, data, key=jax.random.key(0), tol=cfg["tol"], **VARIANTS[cfg["variant"]])
        jax.block_until_ready(cs.weights)
        log = scope["compile_log"]()
        out[rnd] = {"seconds": time.perf_counter() - t, "compiles": log["compiles"], "compile_s": log["compile_s"]}
    out.update(sizes_tried=[p["size"] for p in cs.info["path"]], path=cs.info["path"], size=int(cs.capacity),
               points=int(cs.num_points), kl=float(cs.certificate.kl), verdict=cs.certificate.verdict,
               peak_rss_mb=common.peak_rss_mb())
    print("JSON" + json.dumps(common.jsonable(out)), flush=True)


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--sizes", nargs="+", type=int, default=None, help="N (default 200,000 and 1,000,000)")
        p.add_argument("--repeats", type=int, default=None, help="rounds of both variants (default 2)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    sizes = args.sizes or ([20_000] if args.quick else [200_000, 1_000_000])
    repeats = 1 if args.quick else (args.repeats or 2)
    work = tempfile.mkdtemp(prefix="greedy_path_")
    runs = []
    result = {"D": D + 1, "tol": TOL, "sizes": sizes, "variants": VARIANTS, "runs": runs,
              "environment": common.environment(), "load_average_before": list(os.getloadavg()),
              "note": "one fresh process per (variant, N, repeat), empty compilation caches, variants alternating"}
    stem = common.stem("greedy_path", args.quick)
    for rep in range(repeats):
        for n in sizes:
            names = list(VARIANTS) if rep % 2 == 0 else list(VARIANTS)[::-1]
            for variant in names:
                cache = tempfile.mkdtemp(prefix="jaxcache_", dir=work)
                env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
                env.update(JAX_COMPILATION_CACHE_DIR=cache, CORESETS_JAX_NO_CACHE="1", CORESETS_JAX_PROGRESS="0",
                           XDG_CACHE_HOME=cache, PYTHONPATH=os.pathsep.join([HERE, BENCH]))
                cfg = {"N": n, "variant": variant, "tol": TOL}
                code = "import sys; sys.path.insert(0, %r); import greedy_path; greedy_path.child_main()" % HERE
                res = common.child(code, json.dumps(cfg), env=env, timeout=3600)
                shutil.rmtree(cache, ignore_errors=True)
                res.update(cfg, repeat=rep)
                runs.append(res)
                print(f"N={n} {variant:<17} first {res['first']['seconds']:.1f} s ({res['first']['compiles']} "
                      f"compiles, {res['first']['compile_s']:.1f} s)  second {res['second']['seconds']:.1f} s  "
                      f"sizes {res['sizes_tried']} -> {res['size']}  KL {res['kl']:.3g} {res['verdict']}", flush=True)
                common.write_json(result, args.out, stem)
    shutil.rmtree(work, ignore_errors=True)
    summary = []
    for n in sizes:
        row = {"N": n}
        for variant in VARIANTS:
            rs = [r for r in runs if r["N"] == n and r["variant"] == variant]
            for rnd in ("first", "second"):
                row[f"{variant}_{rnd}_s"] = float(np.median([r[rnd]["seconds"] for r in rs]))
            row[f"{variant}_compile_s"] = float(np.median([r["first"]["compile_s"] for r in rs]))
            row[f"{variant}_sizes"] = sorted({tuple(r["sizes_tried"]) for r in rs})
        for rnd in ("first", "second"):  # paired: the two variants of one repeat ran back to back
            ratios = [a[rnd]["seconds"] / b[rnd]["seconds"] for a, b in zip(
                [r for r in runs if r["N"] == n and r["variant"] == "greedy_path"],
                [r for r in runs if r["N"] == n and r["variant"] == "one_run_per_size"])]
            row[f"ratio_{rnd}_median"] = float(np.median(ratios))
        summary.append(row)
    result.update(summary=summary, load_average_after=list(os.getloadavg()))
    common.write_json(result, args.out, stem)
    return result


if __name__ == "__main__":
    main()
