"""`cj.sample` on a CPU: chains batched (`vmap`) against one after another in the program (`lax.map`).

Batching a NUTS chain batches its trajectory's while loops: JAX traces them to a fixed point and XLA compiles
a mask per chain, so a coreset's first `cj.sample` is mostly that. Batched chains share each pass over the
rows, which pays when a density evaluation reads many rows. This measures both on NUTS, 2 chains x (400 +
400), each variant in a fresh process with an empty compilation cache (alternating in every repeat):
- on OMP coresets of vs_peers' NumPyro logistic model (D = 10, N = 20,000) at M = 100, 300 and 1,000;
- on the full data of the same model (weights None) at N = 2,000, 5,000 and 20,000;
recording the first call (compilation included), the compiled second call, rows x D (the quantity
`inference.driver.SEQUENTIAL_CHAINS_MAX_WORK` bounds) and the draws' mean and sd.

    python benchmarks/investigations/chain_batching.py [--repeats 2] [--problems ...]
Writes results/chain_batching.json.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import common  # noqa: E402

PROBLEMS = ("coreset_m100", "coreset_m300", "coreset_m1000", "full_n2000", "full_n5000", "full_n20000")
QUICK_PROBLEMS = ("coreset_m100",)
VARIANTS = ("vmap", "sequential")

CHILD = r"""
import importlib, json, os, sys, tempfile, time, warnings
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["XDG_CACHE_HOME"]
os.environ["CORESETS_JAX_NO_CACHE"] = "1"
os.environ["CORESETS_JAX_PROGRESS"] = "0"
import numpy as np
import jax
import coresets_jax as cj
import vs_peers
driver = importlib.import_module("coresets_jax.inference.driver")
problem, variant = sys.argv[1], sys.argv[2]
driver.SEQUENTIAL_CHAINS_MAX_WORK = float("inf") if variant == "sequential" else -1
warnings.simplefilter("ignore")
kind, size = problem.split("_")
n = 20_000 if kind == "coreset" else int(size[1:])
scope = {}
exec(vs_peers.MODEL_CODE, scope)
X, y, _ = vs_peers.make_data("logistic", 10, n)
model, data = cj.from_numpyro(scope["logistic"], jax.device_put(X), jax.device_put(y))
key = jax.random.key(0)
weights = cj.coreset(model, data, size=int(size[1:]), method="omp", key=key) if kind == "coreset" else None
rows = int(weights.weights.shape[0]) if weights is not None else n
times = []
for _ in range(2):
    t = time.perf_counter()
    post = cj.sample(model, data, key, weights=weights, num_samples=400, num_warmup=400, num_chains=2, warn=False)
    draws = np.asarray(jax.block_until_ready(post.samples), np.float64)
    times.append(time.perf_counter() - t)
flat = draws.reshape(-1, draws.shape[-1])
print("JSON" + json.dumps({"first_s": times[0], "second_s": times[1], "rows_x_d": rows * flat.shape[1],
                           "mean": flat.mean(0).tolist(), "sd": flat.std(0).tolist()}))
"""


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--repeats", type=int, default=2)
        p.add_argument("--problems", nargs="+", default=None, choices=PROBLEMS)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    problems = args.problems or (QUICK_PROBLEMS if args.quick else PROBLEMS)
    repeats = 1 if args.quick else args.repeats
    runs = common.alternating_children(CHILD, problems, VARIANTS, repeats,
                                       describe=lambda r: f"rows x D {r['rows_x_d']:,}")
    table = {}
    for p in problems:
        med = common.first_second_medians(runs[p])
        a, b = runs[p]["vmap"][0], runs[p]["sequential"][0]
        shift = common.mean_shift_sd(a, b)
        table[p] = {"rows_x_d": a["rows_x_d"], **{v: med[v] for v in VARIANTS}, "mean_shift_sd": shift,
                    "first_ratio": med["sequential"]["first_s"] / med["vmap"]["first_s"],
                    "second_ratio": med["sequential"]["second_s"] / med["vmap"]["second_s"]}
        print(f"{p:<16} first {med['vmap']['first_s']:.2f} -> {med['sequential']['first_s']:.2f} s, compiled "
              f"{med['vmap']['second_s']:.3f} -> {med['sequential']['second_s']:.3f} s (x{table[p]['second_ratio']:.2f})"
              f"; means differ by {shift:.3f} sd", flush=True)
    result = {"environment": common.environment(), "repeats": repeats, "table": table, "runs": runs,
              "what": "cj.sample NUTS 2 x (400 + 400) on a CPU, chains batched (vmap) or sequential (lax.map) in "
                      "the program; fresh processes; medians; ratios sequential over vmap"}
    common.write_json(result, args.out, common.stem("chain_batching", args.quick))
    return result


if __name__ == "__main__":
    main()
