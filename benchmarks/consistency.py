"""Issue 24: batched (vmap) and sharded runs against the single-device loop, on ill-conditioned features.

    .venv/bin/python benchmarks/consistency.py [--quick]    # writes results/consistency.json

Batched: 4 problems (logistic Fisher features, HC Eq. 5.7, of 4 synthetic data sets; N = 2000, J = 100,
M = 50, float32), each method's `jax.vmap(cj.build_fn(method, M))` against a loop of the jitted core: the
error of each (relative, evaluated in float64) and the largest weight difference. Control: the same loop on
the same problems with their rows permuted (8 permutations), which changes nothing but the order of the
sums; the spread of the errors it gives is what rounding alone does to each method (not for the random
methods, whose draws are by row position).
Sharded: V of N = 4000, J = 200, M = 50 (Fisher and centred L2 features) over 4 forced CPU devices
(a subprocess), `cj.build` sharded against one device.
A-IHT II runs with swap=True (the default) and swap=False (the previous rule) side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np

import coresets_jax as cj

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = [(m, {}) for m in cj.METHODS if not m.startswith("test_")] + [("iht2", {"swap": False})]


def label(method, opts):
    return method + "".join(f" {k}={v}" for k, v in opts.items())


def fisher_problems(n, j, count, seed=10):
    model = cj.models.logistic_regression()
    out = []
    for b in range(count):
        key = jax.random.key(seed + b)
        ds = cj.data.synthetic_logistic(key, n)
        approx = cj.laplace(model, ds.train, key=key)
        out.append(cj.project(model, ds.train, approx.sample(jax.random.key(seed + 100 + b), j), norm="fisher",
                              key=jax.random.key(0)))
    return jnp.stack(out)


def rel_error(V64, idx, w):
    y = V64.sum(0)
    dense = np.zeros(V64.shape[0])
    np.add.at(dense, np.asarray(idx), np.asarray(w, np.float64))
    return float(np.linalg.norm(y - dense @ V64) / np.linalg.norm(y)), dense


def batched(VB, M, permutations):
    keys = jax.random.split(jax.random.key(0), VB.shape[0])
    V64 = np.asarray(VB, np.float64)
    rows = []
    for method, opts in VARIANTS:
        solve = cj.build_fn(method, M, **opts)
        jitted = jax.jit(solve)
        loop = [jitted(VB[b], keys[b]) for b in range(VB.shape[0])]
        batch = jax.jit(jax.vmap(solve))(VB, keys)
        row = dict(method=label(method, opts), loop=[], batched=[], weight_reldiff=[], permuted=[])
        for b in range(VB.shape[0]):
            e_loop, w_loop = rel_error(V64[b], loop[b].indices, loop[b].weights)
            e_batch, w_batch = rel_error(V64[b], batch.indices[b], batch.weights[b])
            row["loop"].append(e_loop)
            row["batched"].append(e_batch)
            row["weight_reldiff"].append(float(np.max(np.abs(w_loop - w_batch)) / np.max(np.abs(w_loop))))
            errs = []
            for p in range(0 if cj.registry.resolve(method).random else permutations):  # draws are by position
                perm = np.random.default_rng(p).permutation(VB.shape[1])
                cs = jitted(VB[b][perm], keys[b])
                errs.append(rel_error(V64[b], perm[np.asarray(cs.indices)], cs.weights)[0])
            row["permuted"].append(errs)
        row["batched_over_loop"] = [b / a for a, b in zip(row["loop"], row["batched"])]
        row["permuted_max_over_min"] = [max(e) / min(e) if e else None for e in row["permuted"]]
        rows.append(row)
        print(f"{row['method']:>16}: batched/loop {np.round(row['batched_over_loop'], 3).tolist()}  weights "
              f"{max(row['weight_reldiff']):.1e}  permuted max/min {row['permuted_max_over_min']}"
              f"  loop errors {np.round(row['loop'], 6).tolist()}", flush=True)
    return rows


SHARDED = textwrap.dedent(r"""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    sys.path.insert(0, sys.argv[1])
    import coresets_jax as cj
    from consistency import VARIANTS, label, rel_error
    assert jax.device_count() == 4
    n, j, M = (int(a) for a in sys.argv[2:5])
    model = cj.models.logistic_regression()
    key = jax.random.key(0)
    ds = cj.data.synthetic_logistic(jax.random.key(1), n)
    approx = cj.laplace(model, ds.train, key=key)
    thetas = approx.sample(jax.random.key(2), j)
    out = []
    for norm in ("fisher", "centered"):
        V = cj.project(model, ds.train, thetas, norm=norm, key=key)
        V64, Vs = np.asarray(V, np.float64), cj.shard(V)
        for method, opts in VARIANTS:
            a, b = cj.build(V, M, method, key=key, **opts), cj.build(Vs, M, method, key=key, **opts)
            ea, eb = rel_error(V64, a.indices, a.weights)[0], rel_error(V64, b.indices, b.weights)[0]
            out.append(dict(features=norm, method=label(method, opts), single=ea, sharded=eb, ratio=eb / ea))
            print(f"{norm:>9} {label(method, opts):>16}: single {ea:.4g}  sharded {eb:.4g}  ratio {eb / ea:.3f}",
                  file=sys.stderr, flush=True)
    print("JSON" + json.dumps(out))
""")


def sharded(n, j, M):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SHARDED, HERE, str(n), str(j), str(M)], env=env, text=True,
                          stdout=subprocess.PIPE, timeout=7200)
    if proc.returncode:
        raise RuntimeError(f"the 4-device run failed with exit status {proc.returncode}")
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("JSON")][-1][4:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="N = 500 and 400, 2 permutations")
    args = parser.parse_args()
    n, j, M, perms = (500, 50, 20, 2) if args.quick else (2000, 100, 50, 8)
    out = dict(config=dict(doc=__doc__, jax=jax.__version__, device=str(jax.devices()[0]), cpu_count=os.cpu_count(),
                           batched=dict(N=n, J=j, M=M, problems=4, permutations=perms, dtype="float32")))
    out["batched"] = batched(fisher_problems(n, j, 4), M, perms)
    sn, sj, sm = (400, 50, 20) if args.quick else (4000, 200, 50)
    out["config"]["sharded"] = dict(N=sn, J=sj, M=sm, devices=4, dtype="float32")
    out["sharded"] = sharded(sn, sj, sm)
    name = "consistency_quick.json" if args.quick else "consistency.json"
    with open(os.path.join(HERE, "results", name), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
