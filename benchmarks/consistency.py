"""Issue 24: batched (vmap) and sharded runs against the single-device loop, on ill-conditioned features.

    python benchmarks/consistency.py [--quick]    # writes results/consistency.{json,png} (*_quick.* with --quick)

Batched: 4 problems (--trials; logistic Fisher features, HC Eq. 5.7, of 4 synthetic data sets; N = 2000, J = 100,
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

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

VARIANTS = [(m, {}) for m in cj.METHODS if not m.startswith("test_")] + [("iht2", {"swap": False})]


def label(method, opts):
    return method + "".join(f" {k}={v}" for k, v in opts.items())


def fisher_problems(n, j, count, seed=10):
    return jnp.stack([common.logistic_problem(n, j, "fisher", data_key=jax.random.key(seed + b),
                                              pihat_key=jax.random.key(seed + b),
                                              theta_key=jax.random.key(seed + 100 + b),
                                              proj_key=jax.random.key(0)).V for b in range(count)])


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


def sharded_process(n, j, M) -> None:
    """Sharded over this process's 4 forced devices against one device (run by `common.child`)."""
    assert jax.device_count() == 4
    n, j, M = int(n), int(j), int(M)
    key = jax.random.key(0)
    out = []
    for norm in ("fisher", "centered"):
        V = common.logistic_problem(n, j, norm, data_key=jax.random.key(1), pihat_key=key,
                                    theta_key=jax.random.key(2), proj_key=key).V
        V64, Vs = np.asarray(V, np.float64), cj.shard(V)
        for method, opts in VARIANTS:
            a, b = cj.build(V, M, method, key=key, **opts), cj.build(Vs, M, method, key=key, **opts)
            ea, eb = rel_error(V64, a.indices, a.weights)[0], rel_error(V64, b.indices, b.weights)[0]
            out.append(dict(features=norm, method=label(method, opts), single=ea, sharded=eb, ratio=eb / ea))
            print(f"{norm:>9} {label(method, opts):>16}: single {ea:.4g}  sharded {eb:.4g}  ratio {eb / ea:.3f}",
                  file=sys.stderr, flush=True)
    print("JSON" + json.dumps(out))


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__)
    n, j, M, perms = (500, 50, 20, 2) if args.quick else (2000, 100, 50, 8)
    problems = args.trials or 4
    sn, sj, sm = (400, 50, 20) if args.quick else (4000, 200, 50)
    out = dict(quick=bool(args.quick), environment=common.environment(),
               config=dict(doc=__doc__, batched=dict(N=n, J=j, M=M, problems=problems, permutations=perms,
                                                     dtype="float32"),
                           sharded=dict(N=sn, J=sj, M=sm, devices=4, dtype="float32")))
    out["batched"] = batched(fisher_problems(n, j, problems), M, perms)
    out["sharded"] = common.child("import sys, consistency; consistency.sharded_process(*sys.argv[1:])",
                                  sn, sj, sm, devices=4, timeout=7200)
    stem = common.stem("consistency", args.quick)
    common.write_json(out, args.out, stem)
    plot(out, args.out, stem)
    return out


def plot(out, out_dir, stem):
    """Batched over loop beside the spread that permuting the rows gives (rounding alone); sharded over one
    device."""
    fig, axes = common.figure(1, 2, size=(6.5, 4.0))
    ax = axes[0][0]
    for i, row in enumerate(out["batched"]):
        ax.plot([i] * len(row["batched_over_loop"]), row["batched_over_loop"], "o", color="C0")
        spread = [r for r in row["permuted_max_over_min"] if r is not None]  # none for the random methods
        ax.plot([i + 0.2] * len(spread), spread, "s", color="C1", mfc="none")
    ax.plot([], [], "o", color="C0", label="batched / loop")
    ax.plot([], [], "s", color="C1", mfc="none", label="permuted rows: max / min")
    ax.set_xticks(range(len(out["batched"])), [r["method"] for r in out["batched"]], rotation=60, ha="right",
                  fontsize=7)
    ax.set(yscale="log", ylabel="error ratio", title="vmap against a loop (float32, Fisher features)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.legend(fontsize=8)
    ax = axes[0][1]
    for k, norm in enumerate(("fisher", "centered")):
        rows = [r for r in out["sharded"] if r["features"] == norm]
        ax.bar(np.arange(len(rows)) + 0.4 * k, [r["ratio"] for r in rows], 0.4, label=norm)
    ax.set_xticks(np.arange(len(rows)) + 0.2, [r["method"] for r in rows], rotation=60, ha="right", fontsize=7)
    ax.set(yscale="log", ylabel="sharded error / one-device error", title="4 forced CPU devices against one")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
