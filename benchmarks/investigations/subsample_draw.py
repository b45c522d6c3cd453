"""How Coreset MCMC draws its subsample of S rows: uniform row numbers against a search of the cumulative sum.

`posterior_driven.common.subsampler` draws S rows with probabilities u_n / sum(u). With equal data weights
(a plain dataset) it draws uniform row numbers, O(S); other weights take S binary searches of the N-long
cumulative sum, O(S log N) random reads, which miss the cache once N is large. Both run here in one process
on the same data, alternating: `method="coreset_mcmc"` (the published defaults, hot start off) with data
weights all ones (row numbers) and with one weight changed to 2 (the search), at T1 and T2 iterations; the
time per iteration is the difference of the two warm calls' medians over T2 - T1.

    python benchmarks/investigations/subsample_draw.py [--n 10000000] [--trials 3]
    python benchmarks/investigations/subsample_draw.py --quick      # N = 20,000, one repeat (a smoke run)
Writes results/subsample_draw.json (subsample_draw_quick.json with --quick).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path[:0] = [BENCH, os.path.dirname(BENCH)]
import common  # noqa: E402

M, D = 100, 10


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--n", type=int, default=None, help="rows (default 10,000,000; --quick 20,000)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    n = args.n or (20_000 if args.quick else 10_000_000)
    repeats = 1 if args.quick else (args.trials or 3)
    t1, t2 = (100, 300) if args.quick else (2000, 6000)
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj

    model = cj.models.logistic_regression()
    data = cj.data.synthetic_binary(jax.random.key(1), n, D).train
    fns = {t: jax.jit(cj.coreset_fn(model, "coreset_mcmc", M, num_iters=t, hot_start=False, num_draws=10))
           for t in (t1, t2)}
    ones = jnp.ones(n, jnp.float32)
    weights = {"row_numbers": ones, "search": ones.at[0].set(2.0)}
    for f in fns.values():  # compile and warm
        for u in weights.values():
            jax.block_until_ready(f(jax.random.key(0), data, None, u).weights)
    times = {(t, k): [] for t in fns for k in weights}
    for r in range(repeats):
        for t in (t1, t2):
            for k, u in weights.items():  # alternating
                start = time.perf_counter()
                jax.block_until_ready(fns[t](jax.random.key(r + 1), data, None, u).weights)
                times[(t, k)].append(time.perf_counter() - start)
    per = {k: 1e3 * (np.median(times[(t2, k)]) - np.median(times[(t1, k)])) / (t2 - t1) for k in weights}
    result = {"environment": common.environment(), "N": n, "M": M, "D": D + 1, "T1": t1, "T2": t2,
              "repeats": repeats, "per_iteration_ms": per,
              "seconds": {f"{k}_T{t}": v for (t, k), v in times.items()},
              "search_over_row_numbers": per["search"] / per["row_numbers"]}
    print({k: round(v, 3) for k, v in per.items()}, flush=True)
    common.write_json(result, args.out, common.stem("subsample_draw", args.quick))
    return result


if __name__ == "__main__":
    main()
