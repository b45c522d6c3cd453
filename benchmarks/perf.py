"""Speed and memory of the constructions: per iteration, against N and devices, batched (issues 5 and 6).

Default (issue 5): time per iteration of Frank–Wolfe, GIGA and A-IHT II against the one-pass bandwidth floor
and plain NumPy (numpy_reference.py), on V and on its compression; compressed against uncompressed error;
compile times; the N = 10^6 pipeline's wall time and peak memory in a fresh process. Data: centred L2
features (IHT §2) of HC §7.2 synthetic logistic regression, J = 500, float32. A-IHT II is timed as Algorithm
3 itself, one start from w = 0 (its default, init="both", adds GIGA's passes and runs two starts in lockstep;
solvers.py times that). Per-iteration times are differences (t(k2) - t(k1)) / (k2 - k1) of whole compiled
solves, so the one-off costs (set-up, compilation) cancel; the variants alternate in one loop, medians.

--scale (issue 6): projection + Frank–Wolfe and LR sensitivity sampling against N = 1e5, 1e6, 1e7 on one
device; 1, 2 and 4 forced CPU devices (a process each), the exact sharded path against merged coresets,
error against communication; streaming merge-reduce's peak memory against the one-shot pipeline that holds
all of the data and V (fresh processes). J = 50, M = 100, L2 features. Forced host devices share the same
cores: sharding shows the code path and the communication, not a speed-up (notes.md).

--batched: 100 trials in one `jax.vmap` call against a Python loop of the same trials (N = 10^4, J = 100,
M = 50). "solve": `cj.build_fn(method, M)` on trial b's own V_b (Fisher features of J fresh samples of the
Laplace pi_hat; a deterministic method batched over keys on one V would compute one result and broadcast it)
for random, greedy and A-IHT II methods. "pipeline": pi_hat -> project -> solve -> error in one pure function
of the key. The loops run the jitted core per key (dispatch only) and the public `cj.build` per key
(validation and a host check per call). Batched float32 products add in another order, so a greedy path can
break a near-tie differently: the JSON reports the fraction of trials with the same selection and the
median error of each.

    python benchmarks/perf.py [--quick]
    python benchmarks/perf.py --scale [--quick] [--max-n 1e7] [--only one_device,devices,streaming]
    python benchmarks/perf.py --batched [--quick] [--trials 100] [--repeats 3]

writes results/perf.{json,png}, results/scale.{json,png} or results/batched.{json,png} (*_quick.* with
--quick).
"""

from __future__ import annotations

import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

MODEL = cj.models.logistic_regression()


def fresh_process(function: str, *args, devices: int = 1, cpu: bool = False, timeout: float = 600) -> dict:
    """`function(*args)` of this module in a fresh process, which prints its JSON result (`report`): first
    calls, peak memory and forced devices each need a process of their own."""
    return common.child(f"import sys, perf; perf.{function}(*sys.argv[1:])", *args, devices=devices,
                        env={"JAX_PLATFORMS": "cpu"} if cpu else None, timeout=timeout)


def report(out: dict) -> None:
    print("JSON" + json.dumps(common.jsonable(out)), flush=True)


# ---- default: per iteration -------------------------------------------------------------------------------

J = 500
METHODS = ("frank_wolfe", "giga", "iht2")
OPTIONS = {"iht2": {"init": "zero"}}  # Algorithm 3 itself (docstring)


def features(n: int):
    key = jax.random.key(0)
    return common.logistic_problem(n, J, "centered", data_key=key, pihat_key=key, proj_key=key,
                                   theta_key=jax.random.key(1)).V


def jax_solver(method: str, k: int):
    """A compiled full solve doing k iterations (greedy: size k; A-IHT II: size 50, max_iter k, tol 0)."""
    if method == "iht2":
        solve = jax.jit(cj.build_fn("iht2", 50, init="zero", max_iter=k, tol=0.0))
    else:
        solve = jax.jit(cj.build_fn(method, k))
    key = jax.random.key(0)
    return lambda V: solve(V, key)


def numpy_solver(method: str, k: int):
    import numpy_reference as ref  # SciPy stays out of the fresh processes, whose memory --scale measures

    if method == "iht2":
        return lambda V: ref.iht2(V, 50, k)
    return lambda V: getattr(ref, method)(V, k)


def per_iteration(variants: dict, k1: int, k2: int, repeats: int) -> dict:
    """Seconds per iteration of each variant (name -> (make(k) -> fn, arg)): the median over alternating
    rounds of (t(k2) - t(k1)) / (k2 - k1)."""
    calls = {}
    for name, (make, arg) in variants.items():
        for k in (k1, k2):
            calls[name, k] = lambda fn=make(k), arg=arg: fn(arg)
    runs = common.alternate(calls, repeats, runs=True)
    return {name: float(np.median(np.subtract(runs[name, k2], runs[name, k1]) / (k2 - k1)))
            for name in variants}


def floor(V, repeats: int = 7) -> dict:
    """One pass over V: a reduction (reads V) and a scaled copy (reads and writes it)."""
    reduce, copy = jax.jit(lambda V: jnp.sum(V, axis=0)), jax.jit(lambda V: V * 1.0001)
    t = common.alternate({"pass": lambda: reduce(V), "copy": lambda: copy(V)}, repeats)
    nbytes = V.size * V.dtype.itemsize
    return {"pass_s": t["pass"], "copy_s": t["copy"], "pass_GBps": nbytes / t["pass"] / 1e9,
            "copy_GBps": 2 * nbytes / t["copy"] / 1e9, "floor_s": min(t["pass"], t["copy"] / 2)}


def pipeline_process(n: str, m: str, method: str) -> None:
    """The whole `cj.coreset` pipeline, as a user calls it once (run by `fresh_process`)."""
    t0 = time.perf_counter()
    key = jax.random.key(0)
    ds = cj.data.synthetic_logistic(key, int(n))
    cs = cj.coreset(MODEL, ds.train, size=int(m), method=method, key=key, norm="fisher", num_features=J)
    cs.weights.block_until_ready()
    wall = time.perf_counter() - t0
    report({"wall_s": wall, "peak_rss_GiB": common.peak_rss_mb() / 1024, "num_points": cs.num_points,
            "info": {k: float(v) for k, v in cs.info.items() if getattr(v, "ndim", 1) == 0}})


def iterations(args) -> dict:
    sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    repeats = args.repeats or 3
    res = {"J": J, "dtype": "float32", "features": "centred L2, HC 7.2 synthetic logistic regression",
           "methods": list(METHODS), "per_iteration": {}, "errors": {}, "compile_s": {},
           "notes": ["pipeline peak_rss_GiB: VmHWM of its fresh process (results before issue 23 read "
                     "ru_maxrss, which survives exec and so could report the benchmark driver's peak)"]}
    t_start = time.perf_counter()
    for n in sizes:
        V = features(n)
        t = common.time_fn(cj.compress, V, repeats=1)
        c, t_compress = t["output"], min(t["compile_s"], t["median_s"])
        fl = floor(V)
        Vnp = np.asarray(V)
        entry = {"floor": fl, "rank": c.rank, "relative_discarded": c.relative_discarded,
                 "compress_s": t_compress, "compress_in_passes": t_compress / fl["floor_s"]}
        k1, k2 = (3, 8) if n >= 1_000_000 else (5, 25)
        for method in METHODS:
            t = per_iteration({"jax": (lambda k: jax_solver(method, k), V),
                               "numpy": (lambda k: numpy_solver(method, k), Vnp)}, k1, k2, repeats)
            t.update(per_iteration({"jax_compressed": (lambda k: jax_solver(method, k), c.A)}, 20, 120, repeats))
            t["ratio_jax_to_floor"] = t["jax"] / fl["floor_s"]
            t["ratio_compressed_to_floor"] = t["jax_compressed"] / fl["floor_s"]
            t["speedup_jax_vs_numpy"] = t["numpy"] / t["jax"]
            t["speedup_compressed_vs_numpy"] = t["numpy"] / t["jax_compressed"]
            entry[method] = t
            print(n, method, {k: round(v, 5) for k, v in t.items()}, flush=True)
        res["per_iteration"][str(n)] = entry
        if n == 100_000:  # error with and without compression, and compile times, at these shapes
            for method, size in (("frank_wolfe", 500), ("giga", 500), ("iht2", 100)):
                plain = cj.build(V, size, method, compress=False, **OPTIONS.get(method, {}))
                packed = cj.build(V, size, method, compress=True, **OPTIONS.get(method, {}))
                e0, e1 = float(cj.relative_error(V, plain)), float(packed.info["relative_error"])
                res["errors"][method] = {"N": n, "size": size, "uncompressed": e0, "compressed": e1,
                                         "ratio": e1 / e0, "rank": int(packed.info["rank"])}
                print("error", method, res["errors"][method], flush=True)
            for method in METHODS:  # a fresh (method, size): compilation alone
                solve = jax.jit(cj.build_fn(method, 777, **OPTIONS.get(method, {})))
                res["compile_s"][method] = common.time_fn(lambda: solve.lower(V, jax.random.key(0)).compile(),
                                                          repeats=0)["compile_s"]
            print("compile", res["compile_s"], flush=True)
        V = Vnp = c = None  # freed before the next size and the pipeline's process
    res["fw_gram_cache"] = (
        "Opt-in (frank_wolfe(cache_mb=...)). A cached column costs C*N*4 bytes: at N=1e6 a 256 MiB budget "
        "holds only 64 columns. Measured at N=1e5, M=300 (same run style): 2.35x faster per solve on the "
        "uncompressed V (218 of 299 steps served from the cache), but 1.8x slower on the compressed A "
        "(r=16), where a pass is already only ~4x an N-vector update and the lax.cond/cache bookkeeping "
        "dominates. Compression is the default, so the cache is off by default.")
    n, m, method = (100_000 if args.quick else 1_000_000), 1000, "giga"
    res["pipeline"] = {"N": n, "method": method, "M": m,
                       "steps": "laplace + fisher projection (J=500) + solver, compress='auto'"}
    try:
        res["pipeline"].update(fresh_process("pipeline_process", n, m, method))
    except RuntimeError as err:
        res["pipeline"]["error"] = str(err)
    print("pipeline", res["pipeline"], flush=True)
    res["end_to_end"] = "coreset + NUTS against full-data NUTS: benchmarks/inference.py --end-to-end"
    res["total_s"] = time.perf_counter() - t_start
    return res


def plot_iterations(res: dict, out_dir: str, stem: str) -> None:
    ns = sorted(int(n) for n in res["per_iteration"])
    fig, axes = common.figure(1, len(res["methods"]), size=(4.5, 3.6))
    for ax, method in zip(axes[0], res["methods"]):
        for key, label in (("jax", "JAX"), ("jax_compressed", "JAX compressed"), ("numpy", "NumPy")):
            ax.loglog(ns, [res["per_iteration"][str(n)][method][key] * 1e3 for n in ns], "o-", label=label)
        ax.loglog(ns, [res["per_iteration"][str(n)]["floor"]["floor_s"] * 1e3 for n in ns], "k--",
                  label="one pass over V")
        ax.set(title=method, xlabel="N")
    axes[0][0].set_ylabel(f"ms per iteration (J = {J})")
    axes[0][0].legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


# ---- --scale: against N, devices and streaming memory -----------------------------------------------------

SCALE_J, SCALE_M = 50, 100
SECTIONS = ("one_device", "devices", "streaming")


def scale_thetas():
    return jnp.array([3.0, 3.0, 0.0]) + 0.5 * jax.random.normal(jax.random.key(7), (SCALE_J, 3))


def scale_data(n: int, seed: int = 1):
    return cj.data.synthetic_logistic(jax.random.key(seed), n).train


def one_device(sizes) -> list:
    thetas, key, rows = scale_thetas(), jax.random.key(0), []
    for n in sizes:
        X = scale_data(n)
        p = common.time_fn(lambda: cj.project(MODEL, X, thetas, norm="l2", key=key), repeats=1)
        V = p["output"]
        b = common.time_fn(lambda: cj.build(V, SCALE_M), repeats=1)
        s = common.time_fn(lambda: cj.sensitivity_coreset(X, SCALE_M, key), repeats=1)
        cs, sc = b["output"], s["output"]
        row = {"n": n, "project_s": p["median_s"], "build_fw_s": b["median_s"], "sensitivity_s": s["median_s"],
               "first_call_s": p["compile_s"] + b["compile_s"] + s["compile_s"],
               "fw_error": float(cj.relative_error(V, cs)), "sensitivity_error": float(cj.relative_error(V, sc)),
               "mean_sensitivity": float(sc.info["sensitivity_mean"]), "fw_num_points": cs.num_points}
        print(row, flush=True)
        rows.append(row)
        V = X = None  # freed before the next size
    return rows


def devices_process(n: str) -> None:
    """The exact sharded build against merged coresets on this process's (forced) devices. No compression:
    it would gather a sharded V."""
    n, ndev, key, M = int(n), jax.device_count(), jax.random.key(0), SCALE_M
    X, thetas = cj.shard(scale_data(n)), scale_thetas()
    p = common.time_fn(lambda: cj.project(MODEL, X, thetas, norm="l2", key=key), repeats=1)
    V = p["output"]
    b = common.time_fn(lambda: cj.build(V, M, compress=False), repeats=1)
    cs = b["output"]
    out = {"devices": ndev, "n": n,
           "exact": {"project_s": p["median_s"], "build_s": b["median_s"], "error": float(cj.relative_error(V, cs)),
                     "num_points": cs.num_points, "rounds": 2 * M,
                     # per FW iteration: one (value, index) candidate per device and one psum of a J-row
                     "comm_bytes": M * ndev * (8 + 4 * (SCALE_J + 2)) if ndev > 1 else 0}}
    for per_shard, label in ((M, "merged_M"), (max(1, M // ndev), "merged_M_over_C")):
        t = common.time_fn(lambda: cj.merged_coreset(V, per_shard, ndev), repeats=1)
        mc = t["output"]
        out[label] = {"build_s": t["median_s"], "size_per_shard": per_shard, "capacity": mc.capacity,
                      "num_points": mc.num_points, "error": float(cj.relative_error(V, mc)),
                      "comm_bytes": 8 * mc.capacity if ndev > 1 else 0, "rounds": 1 if ndev > 1 else 0}
    report(out)


def streaming_process(n: str, chunk: str, mode: str) -> None:
    """Merge-reduce over chunks ("stream") or the one-shot pipeline on all of them, and this process's peak."""
    n, chunk, key, thetas = int(n), int(chunk), jax.random.key(0), scale_thetas()
    chunks = (scale_data(chunk, seed=1000 + i) for i in range(n // chunk))
    t = time.perf_counter()
    if mode == "stream":
        cs = cj.stream_coreset(MODEL, chunks, SCALE_M, thetas, key, norm="l2")
    else:
        X = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *list(chunks))
        cs = cj.build(cj.project(MODEL, X, thetas, norm="l2", key=jax.random.split(key)[0]), SCALE_M)
    jax.block_until_ready(cs.weights)
    report({"n": n, "mode": mode, "seconds": time.perf_counter() - t, "peak_rss_mb": common.peak_rss_mb()})


def scale(args) -> dict:
    only = set(args.only.split(","))
    sizes = [n for n in (10**5, 10**6, 10**7) if n <= args.max_n]
    device_n, stream_ns, chunk = 10**6, [2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5], 10**5
    if args.quick:
        sizes, device_n, stream_ns, chunk = [10**4, 10**5], 10**5, [4 * 10**4, 8 * 10**4], 2 * 10**4
    t0 = time.perf_counter()
    path, previous = os.path.join(args.out, common.stem("scale", args.quick) + ".json"), {}
    if os.path.exists(path):
        with open(path) as f:
            previous = json.load(f)
    result = {"config": {"J": SCALE_J, "M": SCALE_M, "model": "logistic, synthetic HC 7.2 data (D = 3)",
                         "norm": "l2", "solver": "frank_wolfe",
                         "notes": ["errors are ||sum v - V^T w|| / ||sum v|| on the l2-projected V",
                                   "times: the second of two calls (the first compiles)",
                                   "one_device uses cj.build's defaults; the devices section passes "
                                   "compress=False (compression gathers a sharded V)",
                                   "peak RSS is VmHWM of a fresh process (includes ~0.5 GB of JAX runtime)",
                                   "forced host devices share the CPU cores: no speed-up is expected"]}}
    runs = {"one_device": lambda: one_device(sizes),
            "devices": lambda: [fresh_process("devices_process", device_n, devices=d, cpu=True) for d in (1, 2, 4)],
            "streaming": lambda: [fresh_process("streaming_process", n, chunk, mode, cpu=True)
                                  for n in stream_ns for mode in ("stream", "one_shot")]}
    for section in SECTIONS:  # a section not asked for is kept from the previous run's file
        result[section] = runs[section]() if section in only else previous[section]
        print(section, json.dumps(common.jsonable(result[section])), flush=True)
    result["seconds_this_run"] = time.perf_counter() - t0
    return result


def plot_scale(result: dict, out_dir: str, stem: str) -> None:
    fig, ax = common.figure(1, 3, size=(5.0, 4.2))
    ax = ax[0]
    od = result["one_device"]
    ns = [r["n"] for r in od]
    ax[0].loglog(ns, [r["project_s"] for r in od], "o-", label=f"project (J={SCALE_J})")
    ax[0].loglog(ns, [r["build_fw_s"] for r in od], "s-", label=f"FW build (M={SCALE_M})")
    ax[0].loglog(ns, [r["sensitivity_s"] for r in od], "^-", label="LR sensitivity coreset")
    ax[0].set(xlabel="N", ylabel="seconds (after compile)", title="one CPU device")
    twin = ax[0].twinx()
    twin.semilogx(ns, [r["fw_error"] for r in od], "k:", label="FW rel. error")
    twin.set_ylabel("FW relative error")
    ax[0].legend(fontsize=8, loc="upper left")
    dv = result["devices"]
    for key, mark, label in (("exact", "o", "exact sharded FW"), ("merged_M", "s", "merged, M per shard"),
                             ("merged_M_over_C", "^", "merged, M/C per shard")):
        ax[1].scatter([max(r[key]["comm_bytes"], 1) for r in dv], [r[key]["error"] for r in dv], marker=mark,
                      label=label)
        for r in dv:
            ax[1].annotate(f"{r['devices']}d", (max(r[key]["comm_bytes"], 1), r[key]["error"]), fontsize=7)
    ax[1].set(xscale="log", yscale="log", xlabel="bytes communicated (1 device: plotted at 1)",
              ylabel="relative error", title=f"N = {dv[0]['n']:.0e} on 1/2/4 forced CPU devices")
    ax[1].legend(fontsize=8)
    for mode, mark in (("stream", "o-"), ("one_shot", "s--")):
        rows = [r for r in result["streaming"] if r["mode"] == mode]
        ax[2].plot([r["n"] for r in rows], [r["peak_rss_mb"] for r in rows], mark, label=mode)
    ax[2].set(xlabel="N", ylabel="peak RSS (MB)", title="streaming merge-reduce memory")
    ax[2].legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


# ---- --batched: one vmapped call against a loop -----------------------------------------------------------

def solve_trials(Vs, keys, method: str, size: int, repeats: int) -> dict:
    """Trial b solves its own Vs[b] with keys[b]: batched, a loop of the jitted core, a loop of cj.build."""
    core = cj.build_fn(method, size)
    batched, single = jax.jit(jax.vmap(core)), jax.jit(core)
    times = common.alternate({
        "batched": lambda: batched(Vs, keys).weights,
        "loop_core": lambda: [single(V, k).weights for V, k in zip(Vs, keys)],
        "loop_build": lambda: [cj.build(V, size, method, key=k, compress=False).weights for V, k in zip(Vs, keys)],
    }, repeats)
    # The batch selects what the loop selects (batched products round differently in float32, so a
    # greedy path may differ in the last bits of a weight).
    batch = batched(Vs, keys)
    checked = min(20, len(keys))
    loop = [single(Vs[i], keys[i]) for i in range(checked)]
    same = np.mean([np.array_equal(np.sort(np.asarray(batch.indices[i])), np.sort(np.asarray(loop[i].indices)))
                    for i in range(checked)])
    return dict(times, speedup_vs_core_loop=times["loop_core"] / times["batched"],
                speedup_vs_build_loop=times["loop_build"] / times["batched"],
                same_selection_fraction=float(same),
                median_error_batched=float(np.median(np.asarray(batch.info["relative_error"][:checked]))),
                median_error_loop=float(np.median([float(cs.info["relative_error"]) for cs in loop])))


def pipeline_trials(data, keys, size: int, num_features: int, repeats: int) -> dict:
    fit, project, solve = cj.laplace_fn(MODEL), cj.project_fn(MODEL, "fisher"), cj.build_fn("giga", size)
    d = data[0].shape[1]

    def trial(key):
        k_theta, k_proj, k_solve = jax.random.split(key, 3)
        approx = fit(data, jnp.zeros(d))
        thetas = approx.mean + jax.random.normal(k_theta, (num_features, d)) @ jnp.linalg.cholesky(approx.cov).T
        return solve(project(k_proj, data, thetas), k_solve).info["relative_error"]

    batched, single = jax.jit(jax.vmap(trial)), jax.jit(trial)
    times = common.alternate({"batched": lambda: batched(keys), "loop_core": lambda: [single(k) for k in keys]},
                             repeats)
    return dict(times, speedup_vs_core_loop=times["loop_core"] / times["batched"],
                median_relative_error=float(np.median(np.asarray(batched(keys)))))


def batched(args) -> dict:
    n, j, size = (2000, 40, 20) if args.quick else (10_000, 100, 50)
    trials = args.trials or (8 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 3)
    data = cj.data.synthetic_logistic(jax.random.key(0), n).train
    approx = cj.laplace(MODEL, data)
    keys = jax.random.split(jax.random.key(2), trials)
    project = jax.jit(jax.vmap(lambda k: cj.project_fn(MODEL, "fisher")(k, data, approx.sample(k, j))))
    Vs = project(jax.random.split(jax.random.key(1), trials))  # trial b's own V_b
    result = {"config": dict(N=n, J=j, M=size, trials=trials, repeats=repeats, quick=args.quick), "solve": {}}
    for method in ("uniform", "importance", "frank_wolfe", "giga", "iht2"):
        result["solve"][method] = solve_trials(Vs, keys, method, size, repeats)
        print(method, json.dumps(result["solve"][method]), flush=True)
    pipe_keys = keys[: max(2, trials // (4 if args.quick else 5))]
    result["pipeline"] = dict(trials=int(pipe_keys.shape[0]), **pipeline_trials(data, pipe_keys, size, j, repeats))
    print("pipeline", json.dumps(result["pipeline"]), flush=True)
    return result


def plot_batched(result: dict, out_dir: str, stem: str) -> None:
    solve, cfg = result["solve"], result["config"]
    labels = list(solve) + ["pipeline"]
    x = np.arange(len(labels))
    fig, ax = common.figure(1, 1, size=(7.0, 3.5))
    ax = ax[0][0]
    ax.bar(x - 0.2, [solve[m]["speedup_vs_core_loop"] for m in solve] + [result["pipeline"]["speedup_vs_core_loop"]],
           0.4, label="vs loop of the jitted core")
    ax.bar(x + 0.2, [solve[m]["speedup_vs_build_loop"] for m in solve] + [np.nan], 0.4, label="vs loop of cj.build")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, rotation=20)
    ax.set(yscale="log", ylabel=f"speed-up of one vmapped call ({cfg['trials']} trials)",
           title=f"{cfg['trials']} batched trials, N={cfg['N']}, J={cfg['J']}, M={cfg['M']} "
                 f"({result['environment']['backend']})")
    ax.legend()
    common.save_figure(fig, out_dir, stem)


MODES = {"perf": (iterations, plot_iterations), "scale": (scale, plot_scale), "batched": (batched, plot_batched)}


def _extra(p):
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--scale", action="store_true",
                      help="against N, 1/2/4 forced devices and streaming memory: results/scale.*")
    mode.add_argument("--batched", action="store_true",
                      help="trials in one vmapped call against a loop (--trials, default 100): results/batched.*")
    p.add_argument("--repeats", type=int, default=None, help="alternating timed rounds (default 3; --quick "
                                                             "--batched: 1)")
    p.add_argument("--max-n", type=float, default=1e7, help="--scale: the largest N on one device")
    p.add_argument("--only", default=",".join(SECTIONS),
                   help="--scale: comma-separated sections to (re)run; the others are kept from the existing JSON")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    mode = "scale" if args.scale else "batched" if args.batched else "perf"
    run, plot = MODES[mode]
    result = {"quick": bool(args.quick), "environment": common.environment()}
    result.update(run(args))
    stem = common.stem(mode, args.quick)  # a quick run never overwrites the full results
    common.write_json(result, args.out, stem)
    plot(result, args.out, stem)
    return result


if __name__ == "__main__":
    main()
