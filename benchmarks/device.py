"""Ready for an accelerator: the large workloads on whatever device JAX sees, with that device recorded.

- `pipeline`: `cj.coreset` (Laplace, Fisher features J = 500, GIGA, M = 1000) on synthetic logistic regression
  (HC §7.2) at N = 10^6 and 10^7: the first call (compilation included) and the second. A size whose V
  would not fit in half the device's memory is skipped and says so;
- `batched`: 100 trials in one `jax.vmap` call against a Python loop of them (`perf.solve_trials`: each
  trial its own V, N = 10^4, J = 100, M = 50), for Frank–Wolfe, GIGA and OMP, the greedy solvers that are
  slower batched than looped on a 2-core CPU (Frank–Wolfe 3x, OMP 6.6x) and should win on an accelerator;
- `coreset_mcmc`: `cj.coreset(..., "coreset_mcmc")` at N = 10^6, M = 100, first and second call;
- `full_nuts`: `cj.sample` NUTS on all the rows (weights=None) at N = 10^5, 1 chain, 200 + 200: the reference
  the coresets are measured against.

Writes benchmarks/results/device_<backend>.json and .png (device_quick.* with --quick: tiny sizes that run on a
CPU in CI). Run it on a GPU machine as it is; nothing in it is CPU-specific.

    python benchmarks/device.py [--quick] [--skip pipeline,batched,...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

FULL = {"pipeline_sizes": (1_000_000, 10_000_000), "J": 500, "M": 1000, "batched": (10_000, 100, 50, 100),
        "mcmc_N": 1_000_000, "mcmc_M": 100, "nuts_N": 100_000, "nuts_steps": 200}
QUICK = {"pipeline_sizes": (5_000,), "J": 30, "M": 30, "batched": (500, 10, 8, 2),
         "mcmc_N": 2_000, "mcmc_M": 10, "mcmc_options": {"num_iters": 100, "max_hot_start": 50, "num_draws": 20},
         "nuts_N": 500, "nuts_steps": 30}
PARTS = ("pipeline", "batched", "full_nuts", "coreset_mcmc")


def device_record() -> dict:
    dev = jax.devices()[0]
    rec = {"backend": jax.default_backend(), "device": str(dev), "device_kind": getattr(dev, "device_kind", ""),
           "device_count": jax.device_count(), "accelerator": jax.default_backend() != "cpu"}
    try:
        stats = dev.memory_stats() or {}
        rec["memory_bytes"] = int(stats.get("bytes_limit", 0)) or None
    except Exception:  # CPU devices may not report memory
        rec["memory_bytes"] = None
    if rec["memory_bytes"] is None:
        try:
            rec["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            rec["memory_bytes"] = None
    if not rec["accelerator"]:
        rec["note"] = ("no GPU or TPU was visible to JAX: this run is on the CPU (the session that ran it had no "
                       "accelerator); run the same script on a GPU machine for the accelerator numbers")
    return rec


def _twice(fn) -> dict:
    t = time.perf_counter()
    out = common.block(fn())
    first = time.perf_counter() - t
    t = time.perf_counter()
    out = common.block(fn())
    return {"first_s": first, "second_s": time.perf_counter() - t, "output": out}


def pipeline(n: int, cfg: dict, memory) -> dict:
    need = n * cfg["J"] * 4
    if memory and need > memory / 2:
        return {"N": n, "skipped": f"V needs {need / 2**30:.1f} GiB, over half of the device's "
                                   f"{memory / 2**30:.1f} GiB available"}
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    common.block(data)
    model = cj.models.logistic_regression()
    res = _twice(lambda: cj.coreset(model, data, size=cfg["M"], method="giga", key=jax.random.key(1),
                                    num_features=cfg["J"]))
    cs = res.pop("output")
    return {"N": n, "J": cfg["J"], "M": cfg["M"], **res, "points": cs.num_points,
            "relative_error": float(cs.info["relative_error"])}


def batched(cfg: dict) -> dict:
    import perf  # benchmarks/perf.py (its --batched mode)

    n, j, size, trials = cfg["batched"]
    model = cj.models.logistic_regression()
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    approx = cj.laplace(model, data)
    project = jax.jit(jax.vmap(lambda k: cj.project_fn(model, "fisher")(k, data, approx.sample(k, j))))
    Vs = project(jax.random.split(jax.random.key(1), trials))
    keys = jax.random.split(jax.random.key(2), trials)
    out = {"N": n, "J": j, "M": size, "trials": trials}
    for method in ("frank_wolfe", "giga", "omp"):
        out[method] = perf.solve_trials(Vs, keys, method, size, repeats=2)
        print("batched", method, {k: round(v, 4) for k, v in out[method].items()}, flush=True)
    return out


def coreset_mcmc(cfg: dict) -> dict:
    import warnings

    n, m = cfg["mcmc_N"], cfg["mcmc_M"]
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    model = cj.models.logistic_regression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a capped run warns; the timing is what is recorded
        res = _twice(lambda: cj.coreset(model, data, size=m, method="coreset_mcmc", key=jax.random.key(1),
                                        **cfg.get("mcmc_options", {})))
    cs = res.pop("output")
    return {"N": n, "M": m, **res, "points": cs.num_points, "iterations": int(cs.info["iterations"]),
            "converged": bool(cs.info["converged"])}


def full_nuts(cfg: dict) -> dict:
    n, steps = cfg["nuts_N"], cfg["nuts_steps"]
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    model = cj.models.logistic_regression()
    res = _twice(lambda: cj.sample(model, data, jax.random.key(1), weights=None, method="nuts",
                                   num_samples=steps, num_warmup=steps, num_chains=1, warn=False).samples)
    res.pop("output")
    return {"N": n, "num_warmup": steps, "num_samples": steps, "chains": 1, **res}


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI, on a CPU)")
    parser.add_argument("--skip", default="", help=f"comma-separated parts to skip, of {','.join(PARTS)}")
    parser.add_argument("--out", default=common.RESULTS)
    parser.add_argument("--tag", default="", help="suffix of the output's name (device_<backend><tag>.json)")
    args = parser.parse_args([] if argv is None and (quick is not None or out_dir is not None) else argv)
    if quick is not None:
        args.quick = quick
    if out_dir is not None:
        args.out = out_dir
    cfg = QUICK if args.quick else FULL
    skip = set(filter(None, args.skip.split(",")))
    dev = device_record()
    print("device:", dev, flush=True)
    result = {"quick": bool(args.quick), "device": dev, "config": cfg, "environment": common.environment(),
              "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    stem = "device_quick" if args.quick else f"device_{dev['backend']}{args.tag}"
    t0 = time.perf_counter()

    def save() -> str:  # after every part, so that a run stopped by a time limit keeps what it finished
        result["total_s"] = time.perf_counter() - t0
        result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        return common.write_json(result, args.out, stem)

    if "pipeline" not in skip:
        result["pipeline"] = []
        for n in cfg["pipeline_sizes"]:
            result["pipeline"].append(pipeline(n, cfg, dev["memory_bytes"]))
            print("pipeline", result["pipeline"][-1], flush=True)
            save()
    if "batched" not in skip:
        result["batched"] = batched(cfg)
        save()
    if "full_nuts" not in skip:
        result["full_nuts"] = full_nuts(cfg)
        print("full_nuts", result["full_nuts"], flush=True)
        save()
    if "coreset_mcmc" not in skip:
        result["coreset_mcmc"] = coreset_mcmc(cfg)
        print("coreset_mcmc", result["coreset_mcmc"], flush=True)
    path = save()
    _plot(result, args.out, stem)
    print("wrote", path)
    return result


def _plot(result: dict, out_dir: str, stem: str) -> None:
    fig, axes = common.figure(1, 2, size=(5.5, 4.0))
    ax = axes[0][0]
    rows = [(f"pipeline N={r['N']:.0e}", r) for r in result.get("pipeline", []) if "first_s" in r]
    for name in ("coreset_mcmc", "full_nuts"):
        if name in result:
            rows.append((f"{name} N={result[name]['N']:.0e}", result[name]))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["first_s"] for _, r in rows], 0.4, label="first call")
    ax.bar(x + 0.2, [r["second_s"] for _, r in rows], 0.4, label="second call")
    ax.set_xticks(x)
    ax.set_xticklabels([n for n, _ in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("seconds")
    ax.set_title(f"{result['device']['device_kind'] or result['device']['backend']}")
    ax.legend()
    ax = axes[0][1]
    b = result.get("batched", {})
    methods = [m for m in ("frank_wolfe", "giga", "omp") if m in b]
    ax.bar(methods, [b[m]["speedup_vs_core_loop"] for m in methods])
    ax.axhline(1.0, color="k", lw=1, ls="--")
    ax.set_ylabel("loop time / batched time")
    ax.set_title(f"{b.get('trials', '')} batched trials vs a loop")
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
