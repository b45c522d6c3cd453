"""Batched trials: one `jax.vmap` call over 100 PRNG keys against a Python loop of the same 100 trials.

Two kinds of trial on synthetic logistic regression (HC §7.2):
- "solve": `cj.build_fn(method, M)` on trial b's own V_b (N x J, Fisher features of J fresh samples of the
  Laplace pi_hat) with its own key, for random (uniform, importance) and greedy (frank_wolfe, giga)
  methods and A-IHT II. Each trial has its own V: a deterministic method batched over keys on one V would
  compute one result and broadcast it, which measures nothing; and
- "pipeline": pi_hat -> project -> solve -> metric, all inside one pure function of the key (the Laplace
  fit by `cj.laplace_fn`, J samples from it, `cj.project_fn`, `cj.build_fn`, and the relative error).

Loops are timed two ways: the public `cj.build` per key (validation and a host check per call, the way a
script calls it), and the jitted pure core per key (compiled once; the loop pays only dispatch and the
per-call work). Times are after compilation, medians over `--repeats` alternating runs. The batch
and the loop compute the same trials, but batched float32 products accumulate in another order, so a greedy
path can break a near-tie differently: the JSON reports the fraction of trials with the same selection
and the median error of each. Writes
benchmarks/results/batched.json and batched.png.

    python benchmarks/batched.py            # N = 10^4, J = 100, M = 50, 100 trials
    python benchmarks/batched.py --quick    # seconds
"""

from __future__ import annotations

import argparse
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

alternate = common.alternate


def solve_trials(Vs, keys, method: str, size: int, repeats: int) -> dict:
    core = cj.build_fn(method, size)
    batched = jax.jit(jax.vmap(core))
    single = jax.jit(core)
    variants = {
        "batched": lambda: batched(Vs, keys).weights,
        "loop_core": lambda: [single(V, k).weights for V, k in zip(Vs, keys)],
        "loop_build": lambda: [cj.build(V, size, method, key=k, compress=False).weights
                               for V, k in zip(Vs, keys)],
    }
    times = alternate(variants, repeats)
    # The batch selects what the loop selects (batched products round differently in float32, so a
    # greedy path may differ in the last bits of a weight).
    batch = batched(Vs, keys)
    checked = min(20, len(keys))
    loop = [single(Vs[i], keys[i]) for i in range(checked)]
    same = np.mean([np.array_equal(np.sort(np.asarray(batch.indices[i])), np.sort(np.asarray(loop[i].indices)))
                    for i in range(checked)])
    err_batch = np.median(np.asarray(batch.info["relative_error"][:checked]))
    err_loop = np.median([float(cs.info["relative_error"]) for cs in loop])
    return dict(times, speedup_vs_core_loop=times["loop_core"] / times["batched"],
                speedup_vs_build_loop=times["loop_build"] / times["batched"],
                same_selection_fraction=float(same), median_error_batched=float(err_batch),
                median_error_loop=float(err_loop))


def pipeline_trials(model, data, keys, size: int, num_features: int, repeats: int) -> dict:
    fit = cj.laplace_fn(model)
    project = cj.project_fn(model, "fisher")
    solve = cj.build_fn("giga", size)
    d = data[0].shape[1]

    def trial(key):
        k_theta, k_proj, k_solve = jax.random.split(key, 3)
        approx = fit(data, jnp.zeros(d))
        thetas = approx.mean + jax.random.normal(k_theta, (num_features, d)) @ jnp.linalg.cholesky(approx.cov).T
        cs = solve(project(k_proj, data, thetas), k_solve)
        return cs.info["relative_error"]

    batched = jax.jit(jax.vmap(trial))
    single = jax.jit(trial)
    times = alternate({"batched": lambda: batched(keys), "loop_core": lambda: [single(k) for k in keys]},
                      repeats)
    errors = np.asarray(batched(keys))
    return dict(times, speedup_vs_core_loop=times["loop_core"] / times["batched"],
                median_relative_error=float(np.median(errors)))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, seconds")
    parser.add_argument("--trials", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", default=common.RESULTS)
    args = parser.parse_args(argv)
    n, j, size = (2000, 40, 20) if args.quick else (10_000, 100, 50)
    trials = args.trials or (8 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 3)
    key = jax.random.key(0)
    model = cj.models.logistic_regression()
    data = cj.data.synthetic_logistic(key, n).train
    approx = cj.laplace(model, data)
    keys = jax.random.split(jax.random.key(2), trials)
    project = jax.jit(jax.vmap(lambda k: cj.project_fn(model, "fisher")(k, data, approx.sample(k, j))))
    Vs = project(jax.random.split(jax.random.key(1), trials))  # trial b's own V_b
    methods = ("uniform", "importance", "frank_wolfe", "giga", "iht2")
    result = {"config": dict(N=n, J=j, M=size, trials=trials, repeats=repeats, quick=args.quick),
              "environment": common.environment(),
              "solve": {}}
    for method in methods:
        result["solve"][method] = solve_trials(Vs, keys, method, size, repeats)
        print(method, json.dumps(result["solve"][method]), flush=True)
    pipe_keys = keys[: max(2, trials // (4 if args.quick else 5))]
    result["pipeline"] = dict(trials=int(pipe_keys.shape[0]),
                              **pipeline_trials(model, data, pipe_keys, size, j, repeats))
    print("pipeline", json.dumps(result["pipeline"]), flush=True)
    os.makedirs(args.out, exist_ok=True)
    name = "batched_quick" if args.quick else "batched"
    common.write_json(result, args.out, name)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return result
    labels = list(result["solve"]) + ["pipeline"]
    core = [result["solve"][m]["speedup_vs_core_loop"] for m in result["solve"]] + [
        result["pipeline"]["speedup_vs_core_loop"]]
    build = [result["solve"][m]["speedup_vs_build_loop"] for m in result["solve"]] + [np.nan]
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.bar(x - 0.2, core, 0.4, label="vs loop of the jitted core")
    ax.bar(x + 0.2, build, 0.4, label="vs loop of cj.build")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel(f"speed-up of one vmapped call ({trials} trials)")
    ax.set_title(f"{trials} batched trials, N={n}, J={j}, M={size} ({jax.default_backend()})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, f"{name}.png"), dpi=120)
    return result


if __name__ == "__main__":
    main()
