"""`cj.sample` on a coreset: its sampler compiled fast (`compilation.FAST_COMPILE`, set as
`compilation.LOOP_COMPILE`) against XLA's defaults. Result: not adopted (benchmarks/README.md).

A coreset's chains evaluate M rows per density evaluation, so on a CPU their first call is mostly compilation
(3.4 s of 3.5 s for NUTS at M = 100, D = 10). FAST_COMPILE (XLA backend optimisation level 0, LLVM without its
expensive passes) compiles faster and runs slower. This measures both on coresets of several models, each
variant in a fresh process with an empty compilation cache (the two alternating in every repeat):
- `first_s`: the first `cj.sample` (compilation included), `second_s`: the same call again (compiled);
- `work`: chains x (warm-up + draws) x M x D, a proxy for the run's size;
- the draws' mean and sd, to show the variants sample the same posterior (their difference in sd units).
The coresets: OMP on vs_peers' NumPyro logistic and Poisson models (D = 10, N = 20,000) at M = 100, 300 and
1,000; the shared real files phishing (logistic, D = 11) and biketrips_large (Poisson, D = 9) at M = 100 with
the built-in models. NUTS, 2 chains x (400 + 400), as vs_peers' route.

    python benchmarks/investigations/fast_sampler.py [--repeats 2] [--problems ...]
Writes results/fast_sampler.json.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import common  # noqa: E402

PROBLEMS = ("logistic10_m100", "poisson10_m100", "logistic10_m300", "logistic10_m1000", "phishing_m100",
            "biketrips_large_m100")
QUICK_PROBLEMS = ("logistic10_m100",)
VARIANTS = ("default", "fast")

CHILD = r"""
import json, os, sys, tempfile, time, warnings
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["XDG_CACHE_HOME"]
os.environ["CORESETS_JAX_NO_CACHE"] = "1"
os.environ["CORESETS_JAX_PROGRESS"] = "0"
import numpy as np
import jax
import coresets_jax as cj
import common, vs_peers
problem, variant, data_dir = sys.argv[1], sys.argv[2], sys.argv[3]
warnings.simplefilter("ignore")
name, m = problem.rsplit("_m", 1)
if name in ("logistic10", "poisson10"):
    kind, d = vs_peers.MODELS[name]
    scope = {}
    exec(vs_peers.MODEL_CODE, scope)
    X, y, _ = vs_peers.make_data(kind, d, 20_000)
    model, data = cj.from_numpyro(scope[kind], jax.device_put(X), jax.device_put(y))
else:
    ds = cj.load_npz(os.path.join(data_dir, name + ".npz"))
    model = cj.models.logistic_regression() if name == "phishing" else cj.models.poisson_regression()
    data = (jax.device_put(ds.X), jax.device_put(ds.y))
key = jax.random.key(0)
cs = cj.coreset(model, data, size=int(m), method="omp", key=key)
if variant == "fast":  # the sampler is a loop program (`compilation.loop_jit_options`)
    cj.compilation.LOOP_COMPILE.update(cj.compilation.FAST_COMPILE)
times = []
for _ in range(2):
    t = time.perf_counter()
    post = cj.sample(model, data, key, weights=cs, num_samples=400, num_warmup=400, num_chains=2, warn=False)
    draws = np.asarray(jax.block_until_ready(post.samples), np.float64)
    times.append(time.perf_counter() - t)
flat = draws.reshape(-1, draws.shape[-1])
print("JSON" + json.dumps({"first_s": times[0], "second_s": times[1], "M": int(cs.weights.shape[0]),
                           "D": int(flat.shape[1]), "work": 2 * 800 * int(cs.weights.shape[0]) * int(flat.shape[1]),
                           "mean": flat.mean(0).tolist(), "sd": flat.std(0).tolist()}))
"""


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--repeats", type=int, default=2)
        p.add_argument("--problems", nargs="+", default=None, choices=PROBLEMS)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    problems = args.problems or (QUICK_PROBLEMS if args.quick else PROBLEMS)
    repeats = 1 if args.quick else args.repeats
    problems = [p for p in problems if not (p.startswith(("phishing", "biketrips"))
                                            and common.data_path(p.rsplit("_m", 1)[0] + ".npz") is None)]
    runs = common.alternating_children(CHILD, problems, VARIANTS, repeats, common.DATA_DIR,
                                       describe=lambda r: f"work {r['work']:.3g}")
    table = {}
    for p in problems:
        med = common.first_second_medians(runs[p])
        a, b = runs[p]["default"][0], runs[p]["fast"][0]
        shift = common.mean_shift_sd(a, b)
        table[p] = {"M": a["M"], "D": a["D"], "work": a["work"], **{v: med[v] for v in VARIANTS},
                    "first_saved_s": med["default"]["first_s"] - med["fast"]["first_s"],
                    "second_extra_s": med["fast"]["second_s"] - med["default"]["second_s"],
                    "mean_shift_sd": shift}
        print(f"{p:<22} first {med['default']['first_s']:.2f} -> {med['fast']['first_s']:.2f} s, compiled "
              f"{med['default']['second_s']:.3f} -> {med['fast']['second_s']:.3f} s; means differ by {shift:.3f} sd",
              flush=True)
    result = {"environment": common.environment(), "repeats": repeats, "table": table, "runs": runs,
              "what": "cj.sample on OMP coresets, NUTS 2 x (400 + 400), fresh processes; the sampler compiled "
                      "with XLA's defaults or with compilation.FAST_COMPILE; medians"}
    common.write_json(result, args.out, common.stem("fast_sampler", args.quick))
    return result


if __name__ == "__main__":
    main()
