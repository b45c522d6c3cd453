"""Scale benchmark (issue 6): construction time and error against N, devices, and streaming memory.

Writes benchmarks/results/scale.json and benchmarks/results/scale.png. Sections:

1. one device: projection + Frank–Wolfe (and LR sensitivity sampling) against N = 1e5, 1e6, 1e7;
2. 1, 2 and 4 forced CPU devices (one subprocess each): the exact sharded path against merged coresets,
   error against communication;
3. streaming merge-reduce: peak resident memory (ru_maxrss of a fresh subprocess) against N, against the
   one-shot pipeline that holds all of the data and V.

Usage:  .venv/bin/python benchmarks/scale.py [--quick] [--max-n 1e7]
On this 2-core CPU, forced host devices share the same cores: sharding shows the code path and the
communication, not a speed-up (notes.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
J, M, D_THETA = 50, 100, 3

COMMON = r"""
import json, os, sys, time
import jax, jax.numpy as jnp, numpy as np
import coresets_jax as cj

J, M = %(J)d, %(M)d
MODEL = cj.models.logistic_regression()
THETAS = jnp.array([3.0, 3.0, 0.0]) + 0.5 * jax.random.normal(jax.random.key(7), (J, 3))

def data(n, seed=1):
    return cj.data.synthetic_logistic(jax.random.key(seed), n).train

def peak_rss_mb():
    # VmHWM: peak resident set of this process's address space, reset by exec (ru_maxrss is inherited
    # from the parent across fork + exec, so it would report the benchmark driver's peak).
    with open("/proc/self/status") as f:
        return [int(l.split()[1]) for l in f if l.startswith("VmHWM")][0] / 1024

# Lead's `compress="auto"` (issue 5 work, when present) SVD-compresses large V before solving; on a sharded V
# it gathers, so the device comparison turns it off on every device count to time the solver path itself.
import inspect
NOCOMP = {"compress": False} if "compress" in inspect.signature(cj.build).parameters else {}

def timed(f, *a, **k):
    t = time.perf_counter(); out = f(*a, **k); jax.block_until_ready(out); return out, time.perf_counter() - t
""" % {"J": J, "M": M}

DEVICES = COMMON + r"""
n = int(sys.argv[1]); ndev = jax.device_count()
X = data(n)
key = jax.random.key(0)
out = {"devices": ndev, "n": n}
Xs = cj.shard(X)
V, _ = timed(cj.project, MODEL, Xs, THETAS, norm="l2", key=key)           # compile
V, t_proj = timed(cj.project, MODEL, Xs, THETAS, norm="l2", key=key)
cs, _ = timed(cj.build, V, M, **NOCOMP)
cs, t_fw = timed(cj.build, V, M, **NOCOMP)
out["exact"] = {"project_s": t_proj, "build_s": t_fw, "error": float(cj.relative_error(V, cs)),
                "num_points": cs.num_points,
                # per FW iteration: one (value, index) candidate per device and one psum of a J-row
                "comm_bytes": M * ndev * (8 + 4 * (J + 2)) if ndev > 1 else 0, "rounds": 2 * M}
for per_shard, label in ((M, "merged_M"), (max(1, M // ndev), "merged_M_over_C")):
    mc, _ = timed(cj.merged_coreset, V, per_shard, ndev)
    mc, t_m = timed(cj.merged_coreset, V, per_shard, ndev)
    out[label] = {"build_s": t_m, "size_per_shard": per_shard, "capacity": mc.capacity,
                  "num_points": mc.num_points, "error": float(cj.relative_error(V, mc)),
                  "comm_bytes": 8 * mc.capacity if ndev > 1 else 0, "rounds": 1 if ndev > 1 else 0}
print("JSON" + json.dumps(out))
"""

STREAM = COMMON + r"""
n, chunk, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
key = jax.random.key(0)
def chunks():
    for i in range(n // chunk):
        yield data(chunk, seed=1000 + i)
t = time.perf_counter()
if mode == "stream":
    cs = cj.stream_coreset(MODEL, chunks(), M, THETAS, key, norm="l2")
else:
    X = jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *list(chunks()))
    cs = cj.build(cj.project(MODEL, X, THETAS, norm="l2", key=jax.random.split(key)[0]), M)
jax.block_until_ready(cs.weights)
elapsed = time.perf_counter() - t
print("JSON" + json.dumps({"n": n, "mode": mode, "seconds": elapsed,
                           "peak_rss_mb": peak_rss_mb()}))
"""


def _run(script: str, *args: str, devices: int = 1, timeout: int = 600) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads([l for l in proc.stdout.splitlines() if l.startswith("JSON")][-1][4:])


def one_device(sizes) -> list:
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj

    model = cj.models.logistic_regression()
    thetas = jnp.array([3.0, 3.0, 0.0]) + 0.5 * jax.random.normal(jax.random.key(7), (J, D_THETA))
    rows = []
    for n in sizes:
        X = cj.data.synthetic_logistic(jax.random.key(1), n).train
        key = jax.random.key(0)
        times = {}
        for rep in range(2):  # first call compiles
            t = time.perf_counter()
            V = jax.block_until_ready(cj.project(model, X, thetas, norm="l2", key=key))
            t1 = time.perf_counter()
            cs = cj.build(V, M)
            jax.block_until_ready(cs.weights)
            t2 = time.perf_counter()
            sc = cj.sensitivity_coreset(X, M, key)
            jax.block_until_ready(sc.weights)
            t3 = time.perf_counter()
            times[rep] = (t1 - t, t2 - t1, t3 - t2)
        row = {"n": n, "project_s": times[1][0], "build_fw_s": times[1][1], "sensitivity_s": times[1][2],
               "first_call_s": sum(times[0]), "fw_error": float(cj.relative_error(V, cs)),
               "sensitivity_error": float(cj.relative_error(V, sc)),
               "mean_sensitivity": float(sc.info["sensitivity_mean"]), "fw_num_points": cs.num_points}
        print(row, flush=True)
        rows.append(row)
        del V, X
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--max-n", type=float, default=1e7)
    parser.add_argument("--only", default="one_device,devices,streaming",
                        help="comma-separated sections to (re)run; others are kept from the existing JSON")
    args = parser.parse_args()
    only = set(args.only.split(","))
    sizes = [n for n in (10**5, 10**6, 10**7) if n <= args.max_n]
    device_n, stream_ns, chunk = 10**6, [2 * 10**5, 4 * 10**5, 8 * 10**5, 16 * 10**5], 10**5
    if args.quick:
        sizes, device_n, stream_ns, chunk = [10**4, 10**5], 10**5, [4 * 10**4, 8 * 10**4], 2 * 10**4
    t0 = time.perf_counter()
    name = "scale_quick" if args.quick else "scale"
    previous = {}
    if os.path.exists(os.path.join(RESULTS, name + ".json")):
        with open(os.path.join(RESULTS, name + ".json")) as f:
            previous = json.load(f)
    result = {"config": {"J": J, "M": M, "model": "logistic, synthetic HC 7.2 data (D = 3)", "norm": "l2",
                         "solver": "frank_wolfe", "machine": "2-core CPU, 24 GiB shared",
                         "notes": ["errors are ||sum v - V^T w|| / ||sum v|| on the l2-projected V",
                                   "times: the second of two calls (the first compiles)",
                                   "one_device uses cj.build's defaults; the devices section passes "
                                   "compress=False where build has it (compression gathers a sharded V)",
                                   "peak RSS is VmHWM of a fresh subprocess (includes ~0.5 GB of JAX runtime)",
                                   "forced host devices share 2 cores: no speed-up is expected",
                                   "no GPU was lent to this session"]}}
    result["one_device"] = one_device(sizes) if "one_device" in only else previous["one_device"]
    if "devices" in only:
        result["devices"] = []
        for ndev in (1, 2, 4):
            r = _run(DEVICES, str(device_n), devices=ndev)
            print(r, flush=True)
            result["devices"].append(r)
    else:
        result["devices"] = previous["devices"]
    if "streaming" in only:
        result["streaming"] = []
        for n in stream_ns:
            for mode in ("stream", "one_shot"):
                r = _run(STREAM, str(n), str(chunk), mode)
                print(r, flush=True)
                result["streaming"].append(r)
    else:
        result["streaming"] = previous["streaming"]
    result["seconds_this_run"] = time.perf_counter() - t0
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, name + ".json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(RESULTS, name + ".png"))


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    od = result["one_device"]
    ns = [r["n"] for r in od]
    ax[0].loglog(ns, [r["project_s"] for r in od], "o-", label="project (J=%d)" % J)
    ax[0].loglog(ns, [r["build_fw_s"] for r in od], "s-", label="FW build (M=%d)" % M)
    ax[0].loglog(ns, [r["sensitivity_s"] for r in od], "^-", label="LR sensitivity coreset")
    ax[0].set(xlabel="N", ylabel="seconds (after compile)", title="one CPU device")
    ax0 = ax[0].twinx()
    ax0.semilogx(ns, [r["fw_error"] for r in od], "k:", label="FW rel. error")
    ax0.set_ylabel("FW relative error")
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
    st = result["streaming"]
    for mode, mark in (("stream", "o-"), ("one_shot", "s--")):
        rows = [r for r in st if r["mode"] == mode]
        ax[2].plot([r["n"] for r in rows], [r["peak_rss_mb"] for r in rows], mark, label=mode)
    ax[2].set(xlabel="N", ylabel="peak RSS (MB)", title="streaming merge-reduce memory")
    ax[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
