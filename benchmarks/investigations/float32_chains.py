"""NUTS on an OMP coreset in float32 and in float64: why `cj.sample` runs a coreset's chains in float64.

The problem of benchmarks/vs_peers.py: logistic regression, D = 10, as a NumPyro model (`cj.from_numpyro`),
synthetic rows at N (default 5e5). pi_hat is the Laplace fit on all rows, J = 500 Fisher features, OMP
with M = 100. On its coreset, BlackJAX's NUTS runs with window adaptation (diagonal mass matrix, target
acceptance 0.8, started at the Laplace mode), 2 chains x (400 + 400), in float32 and in float64: the same
program, the chain state and weights cast to each dtype (float64 inside `jax.enable_x64`). Each dtype runs
`--repeats` keys. Recorded per run: mean leapfrog steps per draw, adapted step size, acceptance, wall
time of the compiled call (its first, compiling call is reported apart), and the draws' posterior sd and
mean against full-data float32 NUTS on the same rows (`cj.sample` with weights=None, 2 x (400 + 400)).

The float32 chains hit NUTS's tree-depth cap (1,023 steps): the weighted gradient
sum_m w_m grad log p(x_m | theta) cancels terms with weights up to ~1e6, so its float32 rounding is a rough
force that only a tiny step integrates. That is what `inference/sample.py`'s `_chain_precision` avoids.

    python benchmarks/investigations/float32_chains.py [--n 500000] [--repeats 3]
    python benchmarks/investigations/float32_chains.py --quick      # N = 5,000, one repeat (a smoke run)
Writes results/float32_chains.json (float32_chains_quick.json with --quick).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path[:0] = [BENCH, os.path.dirname(BENCH)]
import common  # noqa: E402

D, J, M = 10, 500, 100
WARMUP, DRAWS, CHAINS = 400, 400, 2


def nuts_runner(model, rows, w, theta0):
    """A jitted (key -> draws, steps, step size, acceptance) with window adaptation, in the dtype of w."""
    import blackjax
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj

    def one_chain(key, w, theta0):
        logdensity = cj.weighted_log_density(model, rows, w)
        k_adapt, k_run = jax.random.split(key)
        adapt = blackjax.window_adaptation(blackjax.nuts, logdensity, target_acceptance_rate=0.8)
        (state, params), _ = adapt.run(k_adapt, theta0, WARMUP)
        kernel = blackjax.nuts(logdensity, **params)

        def step(state, k):
            state, info = kernel.step(k, state)
            return state, (state.position, info.num_integration_steps, info.acceptance_rate)

        _, (draws, steps, acc) = jax.lax.scan(step, state, jax.random.split(k_run, DRAWS))
        return draws, jnp.mean(steps.astype(w.dtype)), params["step_size"], jnp.mean(acc)

    run = jax.jit(lambda key, w, theta0: jax.vmap(one_chain, (0, None, None))(jax.random.split(key, CHAINS),
                                                                              w, theta0))
    return lambda key: run(key, w, theta0)


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--n", type=int, default=None, help="rows (default 500,000; --quick 5,000)")
        p.add_argument("--repeats", type=int, default=None, help="compiled calls per dtype (default 3; --quick 1)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    args.n = args.n or (5_000 if args.quick else 500_000)
    args.repeats = args.repeats or (1 if args.quick else 3)
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj
    import vs_peers

    warnings.simplefilter("ignore")
    scope: dict = {}
    exec(vs_peers.MODEL_CODE, scope)
    X, y, _ = vs_peers.make_data("logistic", D, args.n)
    model, data = cj.from_numpyro(scope["logistic"], jax.device_put(X), jax.device_put(y))
    key = jax.random.key(0)
    k_pi, k_theta, k_proj, k_solve, k_ref = jax.random.split(key, 5)
    approx = cj.laplace(model, data, key=k_pi)
    V = cj.project(model, data, approx.sample(k_theta, J), norm="fisher", key=k_proj)
    cs = cj.build(V, M, "omp", key=k_solve)
    keep = np.asarray(cs.weights) > 0
    idx, w = np.asarray(cs.indices)[keep], np.asarray(cs.weights)[keep]
    rows = jax.tree_util.tree_map(lambda a: a[idx], data)
    ref = np.asarray(cj.sample(model, data, k_ref, num_samples=DRAWS, num_warmup=WARMUP, num_chains=CHAINS,
                               warn=False).samples, np.float64).reshape(-1, D)
    ref_mean, ref_sd = ref.mean(0), ref.std(0)
    out = {"N": args.n, "D": D, "J": J, "M": M, "points": int(keep.sum()), "max_weight": float(w.max()),
           "weight_sum": float(w.sum()), "chains": CHAINS, "warmup": WARMUP, "draws": DRAWS,
           "full_nuts_sd": ref_sd.tolist(), "runs": []}
    for name in ("float32", "float64"):
        ctx = jax.enable_x64(name == "float64")
        with ctx:
            dtype = jnp.float64 if name == "float64" else jnp.float32
            run = nuts_runner(model, rows, jnp.asarray(w, dtype), jnp.asarray(approx.mean, dtype))
            for r in range(args.repeats + 1):  # the first call compiles
                t0 = time.perf_counter()
                draws, steps, step, acc = jax.block_until_ready(run(jax.random.key(100 + r)))
                seconds = time.perf_counter() - t0
                s = np.asarray(draws, np.float64).reshape(-1, D)
                row = {"dtype": name, "repeat": r, "compiling_call": r == 0, "seconds": seconds,
                       "leapfrog_steps": np.asarray(steps).tolist(), "step_size": np.asarray(step).tolist(),
                       "acceptance": np.asarray(acc).tolist(),
                       "sd_over_full_nuts_sd": (s.std(0) / ref_sd).tolist(),
                       "max_abs_z_against_full_nuts": float(np.max(np.abs(s.mean(0) - ref_mean) / ref_sd))}
                out["runs"].append(row)
                print(f"{name} repeat {r}: {seconds:.2f} s, steps {np.round(row['leapfrog_steps'], 1)}, "
                      f"step {np.round(row['step_size'], 5)}, max|z| {row['max_abs_z_against_full_nuts']:.2f}",
                      flush=True)
    for name in ("float32", "float64"):
        warm = [r for r in out["runs"] if r["dtype"] == name and not r["compiling_call"]]
        out[f"{name}_median_seconds"] = float(np.median([r["seconds"] for r in warm]))
        out[f"{name}_median_steps"] = float(np.median([r["leapfrog_steps"] for r in warm]))
    out["environment"] = common.environment()
    path = common.write_json(out, args.out, "float32_chains_quick" if args.quick else "float32_chains")
    print(f"wrote {path}: float32 {out['float32_median_seconds']:.2f} s ({out['float32_median_steps']:.0f} "
          f"steps), float64 {out['float64_median_seconds']:.2f} s ({out['float64_median_steps']:.1f} steps)")
    return out


if __name__ == "__main__":
    main()
