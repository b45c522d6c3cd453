"""`cj.sample` on a coreset on a machine with a GPU: its chains on the GPU against the same chains on the host CPU.

On an H200 the coreset route's sampling stage took 6.0-7.4 s from a fresh process (vs_peers, N = 5e5 and 1e6),
against 2.3-2.4 s on the 2-core CPU. A coreset's chains evaluate M = 100 rows per step: a GPU runs them as
chains of tiny dependent kernels, bound by launch latency, while the host CPU runs them in-cache. This
measures three placements of the same program, each in a fresh process with an empty compilation cache,
alternating in every repeat:
- `gpu`: the data on the GPU, the chains there too (`sample.HOST_CHAIN_ROWS = 0`);
- `cpu`: the data on the host, the chains there;
- `auto`: the data on the GPU, `cj.sample`'s default (the chains on the host up to `HOST_CHAIN_ROWS` rows);
- `first_s`: the first `cj.sample` (compilation included), `second_s`: the same call again (compiled);
- the draws' mean and sd, to show the two placements sample the same posterior.
The coreset: the first M rows of vs_peers' NumPyro logistic regression (D = 10) with weights N / M (N = 1e6),
M = 100 (the shape of the route's coreset), 1,000 and 10,000; NUTS, 2 chains x (400 + 400), as the route.

    python benchmarks/investigations/sample_placement.py [--repeats 2] [--sizes 100 1000 10000] [--out DIR]
Writes results/sample_placement.json. On a machine without a GPU both placements are the CPU (a smoke run).
"""

from __future__ import annotations

import importlib
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path[:0] = [HERE, os.path.dirname(HERE)]
import common  # noqa: E402

VARIANTS = ("gpu", "cpu", "auto")
N_REPRESENTED, SIZES, QUICK_SIZES = 1_000_000, (100, 1_000, 10_000), (100,)

CHILD = r"""
import json, os, sys, tempfile, time, warnings
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["XDG_CACHE_HOME"]
os.environ["CORESETS_JAX_NO_CACHE"] = "1"
import numpy as np
import jax
import coresets_jax as cj
import vs_peers
cell, variant, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = int(cell.rsplit("_m", 1)[1])
warnings.simplefilter("ignore")
if variant == "gpu":
    sys.modules["coresets_jax.inference.sample"].HOST_CHAIN_ROWS = 0
scope = {}
exec(vs_peers.MODEL_CODE, scope)
X, y, _ = vs_peers.make_data("logistic", 10, m)
device = jax.devices("cpu")[0] if variant == "cpu" else jax.devices()[0]
with jax.default_device(device):
    model, data = cj.from_numpyro(scope["logistic"], jax.device_put(X, device), jax.device_put(y, device))
    cs = cj.Coreset(jax.device_put(np.arange(m, dtype=np.int32), device),
                    jax.device_put(np.full(m, n / m, np.float32), device))
    times = []
    for call in range(2):
        t0 = time.perf_counter()
        post = cj.sample(model, data, jax.random.key(0), weights=cs, num_samples=400, num_warmup=400,
                         num_chains=2, warn=False)
        s = np.asarray(post.samples)
        times.append(time.perf_counter() - t0)
draws = s.reshape(-1, s.shape[-1])
print("JSON" + json.dumps({"first_s": times[0], "second_s": times[1], "placed_on": str(post.samples.devices()),
                           "mean": draws.mean(0).tolist(), "sd": draws.std(0).tolist()}))
"""


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--repeats", type=int, default=2)
        p.add_argument("--sizes", type=int, nargs="+", default=None)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    repeats = 1 if args.quick else args.repeats
    cells = [f"logistic10_m{m}" for m in sizes]
    runs = common.alternating_children(CHILD, cells, VARIANTS, repeats, N_REPRESENTED,
                                       describe=lambda r: r["placed_on"])
    rows = []
    for cell in cells:
        med = common.first_second_medians(runs[cell])
        rows.append({"cell": cell, "M": int(cell.rsplit("_m", 1)[1]), "medians": med,
                     "cpu_over_gpu_first": med["cpu"]["first_s"] / med["gpu"]["first_s"],
                     "cpu_over_gpu_second": med["cpu"]["second_s"] / med["gpu"]["second_s"],
                     "auto_over_gpu_first": med["auto"]["first_s"] / med["gpu"]["first_s"],
                     "mean_shift_sd": max(common.mean_shift_sd(runs[cell]["gpu"][0], runs[cell][v][0])
                                          for v in ("cpu", "auto"))})
    result = {"environment": common.environment(), "N_represented": N_REPRESENTED, "repeats": repeats,
              "host_chain_rows": importlib.import_module("coresets_jax.inference.sample").HOST_CHAIN_ROWS,
              "runs": runs, "rows": rows}
    for r in rows:
        print({k: r[k] for k in r if k != "cell"})
    print("wrote", common.write_json(result, args.out, common.stem("sample_placement", args.quick)))
    return result


if __name__ == "__main__":
    main()
