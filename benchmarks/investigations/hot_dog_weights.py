"""Why published Coreset MCMC (Hot DoG) is worse than uniform on some problems: its weights run away.

Two measurements per problem, at M = 100, from the published start (M rows drawn uniformly, N / M each):

1. **The gradient at the start.** The exact KL gradient (coreset-mcmc.md Eq. C3)
       g_m = -Cov_{pi_w0}(l_m, T - w0 . L),   T(theta) = sum_n l_n(theta) over all N rows,
   from `--draws` NUTS draws of pi_w0 (4 chains), against the estimate one training iteration makes: two
   independent draws (the K = 2 chains) and T from S = M rows scaled by N / M. Reported: the median over
   coordinates of |g_m| / sd(estimate_m) (signal to noise of one step), the share of coordinates whose
   exact gradient asks for a smaller weight, and sum_m g_m.
2. **The weights during training.** `cj.coreset(..., method="coreset_mcmc")` with the published settings
   for `--iters` iterations, and the same with NUTS (500 adaptation steps at w0) in place of the authors'
   slice sampler; at each checkpoint (500, 1,000, 2,000, ... training iterations) the weight
   sum over N, the largest weight over N / M and the number of weights at 0; then the z2 of the method's
   own draws against the full-data reference (models.py's cached reference), and that of its draws at the
   start w0 (`start_draws=True`, which changes nothing in training).

Hot DoG's step for weight m is about d_m / sqrt(t) times ADAM's normalised gradient, with d_m an EMA of
the running maximum of |w_m - w0_m| (hot-dog.md Eq. H3): the step grows with the distance travelled. Noise
of either sign averages out, but a bias of one sign held for a few hundred steps grows the weight
geometrically. The gradient is unbiased only when the K chains are draws from the current pi_w; a kernel
that mixes slowly lags behind a moving pi_w and biases it. The NUTS column tests this: the same
algorithm, with chains that mix in a few steps.

    python benchmarks/investigations/hot_dog_weights.py --problems bradley_terry phishing biketrips_large
    python benchmarks/investigations/hot_dog_weights.py --add --problems gaussian_location ds1
Writes benchmarks/results/hot_dog_weights.json (--add keeps the other problems' rows of that file, each row
recording its commit).
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.core import log_likelihoods  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

SIZE = 100
# The problems this measures, in the order that seeds them (key(i) for the i-th, whatever a run's order).
# Not spike and slab: its discrete indicators rule out the NUTS draws of pi_w0 and the NUTS column.
PROBLEMS = ("bradley_terry", "phishing", "biketrips_large", "gaussian_location", "linear_regression", "ds1",
            "logistic_binary10", "airportdelays_large")
NUTS_WARMUP = 500  # step-size adaptation at w0 before the hot start (the slice sampler adapts nothing)


def _row_lls(model):
    """(thetas (S, D), rows) -> (S, rows) log-likelihoods (`cj.core.log_likelihoods` at each theta)."""
    return jax.jit(jax.vmap(lambda t, d: log_likelihoods(model, t, d), (0, None)))


def gradient_at_start(problem, key, draws: int, repeats: int) -> dict:
    model, data = problem["model"], problem["data"]
    n = models.n_rows(problem)
    k_cs, k_post, k_est = jax.random.split(key, 3)
    start = cj.coreset(model, data, size=SIZE, method="uniform", key=k_cs)  # the published start
    idx, w = np.asarray(start.indices), np.asarray(start.weights, np.float64)
    post = cj.sample(model, data, k_post, weights=start, method="nuts", num_samples=draws // 4,
                     num_warmup=1000, num_chains=4)
    thetas = np.asarray(post.samples).reshape(-1, np.shape(post.samples)[-1])
    lls = _row_lls(model)
    take = lambda rows: jax.tree_util.tree_map(lambda a: a[rows], data)  # noqa: E731
    core = np.asarray(lls(jnp.asarray(thetas), take(idx)), np.float64)          # (S, M)
    full = np.concatenate([np.asarray(lls(jnp.asarray(thetas[i:i + 256]), data), np.float64).sum(1)
                           for i in range(0, len(thetas), 256)])
    h = full - core @ w
    exact = -np.mean((core - core.mean(0)) * (h - h.mean())[:, None], axis=0)
    rng = np.random.default_rng(int(jax.random.randint(k_est, (), 0, 2 ** 30)))
    one_step = []
    for _ in range(repeats):
        pair = rng.choice(len(thetas), 2, replace=False)
        rows = rng.choice(n, SIZE, replace=False)
        target = np.asarray(lls(jnp.asarray(thetas[pair]), take(rows)), np.float64).sum(1) * n / SIZE
        hs = target - core[pair] @ w
        one_step.append(-(core[pair[0]] - core[pair[1]]) * (hs[0] - hs[1]) / 2.0)  # Eq. C3 with K = 2
    one_step = np.asarray(one_step)
    return {"n": n, "draws": len(thetas), "repeats": repeats,
            "median_signal_to_noise": float(np.median(np.abs(exact) / one_step.std(0))),
            "share_wanting_smaller_weight": float(np.mean(exact > 0)),
            "exact_gradient_sum": float(exact.sum()), "mean_abs_exact_gradient": float(np.abs(exact).mean()),
            "mean_one_step_sd": float(one_step.std(0).mean())}


def training_trace(problem, ref, key, iters: int, kernel: str) -> dict:
    model, data = problem["model"], problem["data"]
    n = models.n_rows(problem)
    options = {} if kernel == "slice" else {"kernel": kernel, "num_warmup": NUTS_WARMUP}
    t0 = time.perf_counter()
    cs = cj.coreset(model, data, size=SIZE, method="coreset_mcmc", key=key, num_iters=iters, start_draws=True,
                    **options)
    seconds = time.perf_counter() - t0
    info = cs.info
    taken = int(np.asarray(info["checkpoints"]))
    weights = np.asarray(info["checkpoint_weights"], np.float64)[:taken]
    first = 500
    own = np.asarray(info["samples"]).reshape(-1, np.shape(info["samples"])[-1])
    at_start = np.asarray(info["start_samples"]).reshape(own.shape)  # draws at w0 (start_draws=True)
    final = np.asarray(cs.weights, np.float64)
    return {"iters": iters, "seconds": seconds, "hot_start_steps": int(info["hot_start_steps"]),
            "hot_start_converged": bool(info["hot_start_converged"]),
            "checkpoints": [first * 2 ** i for i in range(taken)],
            "weight_sum_over_n": [float(w.sum() / n) for w in weights],
            "max_weight_over_start": [float(w.max() * SIZE / n) for w in weights],
            "weights_at_zero": [int((w <= 0).sum()) for w in weights],
            "final": {"weight_sum_over_n": float(final.sum() / n), "max_weight_over_start": float(final.max() * SIZE / n),
                      "weights_at_zero": int((final <= 0).sum())},
            "z2_own_draws": models.z2(own, ref), "z2_start_own_draws": models.z2(at_start, ref)}


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS[:3]), choices=PROBLEMS)
        p.add_argument("--iters", type=int, default=30_000)
        p.add_argument("--kernels", nargs="+", default=["slice", "nuts"])
        p.add_argument("--draws", type=int, default=8000)
        p.add_argument("--repeats", type=int, default=400)
        p.add_argument("--add", action="store_true",
                       help="keep the other problems' rows of an existing results file with the same settings")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    if args.quick:
        args.iters, args.draws, args.repeats = 2000, 400, 50
    settings = {"M": SIZE, "iters": args.iters, "draws": args.draws, "repeats": args.repeats,
                "method": "coreset_mcmc with its published defaults except num_iters; kernel "
                          f"'nuts': NUTS with {NUTS_WARMUP} adaptation steps at w0 in place of the "
                          "authors' slice sampler"}
    stem = common.stem("hot_dog_weights", args.quick)
    rows, earlier = [], {}
    path = os.path.join(args.out, stem + ".json")
    if args.add and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        if old["settings"] != settings:
            raise SystemExit(f"--add: {path} has other settings ({old['settings']})")
        earlier = {"rows": [r for r in old["rows"] if r["problem"] not in args.problems],
                   "commits": old.get("commits") or [old["environment"].get("git_commit")]}
    for name in args.problems:
        problem = models.load_problem(name, args.data_dir)
        ref = models.reference(name, problem)
        k_grad, k_train = jax.random.split(jax.random.key(PROBLEMS.index(name)))
        row = {"problem": name, "M": SIZE, "gradient_at_start": gradient_at_start(problem, k_grad, args.draws, args.repeats),
               "training": {kernel: training_trace(problem, ref, k_train, args.iters, kernel)
                            for kernel in args.kernels}}
        print(row, flush=True)
        rows.append(row)
    env = common.environment()
    for row in rows:
        row["commit"] = env.get("git_commit")
    result = {"environment": env, "rows": earlier.get("rows", []) + rows, "settings": settings,
              "commits": sorted(set(earlier.get("commits", [])) | {env.get("git_commit")})}
    common.write_json(result, args.out, stem)
    return result


if __name__ == "__main__":
    main()
