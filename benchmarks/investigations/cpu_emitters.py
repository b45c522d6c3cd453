"""XLA:CPU's classic fusion emitters (`compilation.LEGACY_EMITTERS`, `xla_cpu_use_fusion_emitters: False`)
against its MLIR-based default: first calls (compilation included) and compiled calls, in fresh processes.

XLA:CPU generates the code of its fused loops with emitters built on MLIR since 2025; the ones it used before
are still selectable per program. They compile much faster, and their code is as fast on some programs and
slower on others. This benchmark measured which, and chose where the package uses them. Three arms, each a
fresh process with an empty persistent cache, progress bars off, the arms alternating in every repeat:

- `xla`: XLA's defaults everywhere (CORESETS_JAX_LEGACY_EMITTERS=0);
- `ours`: the package's default (the classic emitters for the projection, OMP, the
  fast-compiled small programs, and a coreset's sampler where rows x D <= `sample.LEGACY_LOOP_WORK`);
- `all`: the classic emitters for every program of the process (XLA_FLAGS=--xla_cpu_use_fusion_emitters=false),
  to show what the programs left out would cost.

Rows:
- `route:logistic10` / `route:poisson10`: vs_peers.py's fixed-size route at N = 5e5 (`cj.coreset` OMP M = 100,
  `cj.sample` NUTS 2 x (400 + 400), `cj.certify`), on its NumPyro models;
- `coreset:<problem>`: `cj.coreset(size=10 D, method="omp")` on logistic D = 50 (N = 2e5) and the shared real
  files biketrips_large and airportdelays_large (Poisson regression, tiled to N = 5e5; skipped where absent);
- `sample:<M>x<D>`: `cj.sample` NUTS 2 x (500 + 500) on a uniform coreset of M rows of a logistic regression
  (N = 1e5), D = 10 and 50;
- `full:nuts`: full-data `cj.sample` NUTS 2 x (200 + 200), N = 1e5, D = 11;
- `laplace:poisson10`, `certify:logistic10`: `cj.laplace` on all rows and `cj.certify(precision="float64")`
  at N = 5e5 (data passes the package leaves on XLA's defaults).

The compiled call is the second call with the same arguments; a checksum of each result (the weights, draws or
KL) is recorded to show what the arms computed. Writes results/cpu_emitters.{json,png} (*_quick.* with
--quick: one repeat of two small rows).

    python benchmarks/investigations/cpu_emitters.py [--quick] [--repeats 2] [--rows route:logistic10 ...]
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402

ROWS = ("route:logistic10", "route:poisson10", "coreset:logistic50", "coreset:biketrips_large",
        "coreset:airportdelays_large", "sample:100x10", "sample:1000x10", "sample:4096x10", "sample:300x50",
        "sample:2000x50", "full:nuts", "laplace:poisson10", "certify:logistic10")
QUICK_ROWS = ("sample:100x10", "coreset:logistic50")
ARMS = ("xla", "ours", "all")
ROUTE_N = 500_000
QUICK_N = 20_000

CHILD = r"""
import json, os, sys, tempfile, time, warnings
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # an empty persistent cache
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks", "investigations"))
import numpy as np
import jax, jax.numpy as jnp
import coresets_jax as cj
import vs_peers
from certify_precision import _problem
warnings.simplefilter("ignore")
row, quick = sys.argv[1], sys.argv[2] == "1"
kind, what = row.split(":")
key = jax.random.key(0)
n = QUICK_N if quick else ROUTE_N

def synthetic_logistic(n, d):
    rng = np.random.default_rng([n, d])
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:, -1] = 1.0
    eta = X @ (rng.standard_normal(d) / np.sqrt(d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-eta)), 1.0, -1.0).astype(np.float32)
    return cj.models.logistic_regression(), (jnp.asarray(X), jnp.asarray(y))

if kind == "route":
    model, data = _problem(what, n)
    def call():
        cs = cj.coreset(model, data, size=100, method="omp", key=key)
        post = cj.sample(model, data, key, weights=cs, num_samples=400, num_warmup=400, num_chains=2, warn=False)
        return cj.certify(model, data, cs, post.samples).kl
elif kind == "coreset":
    model, data = _problem(what, 200_000 if what == "logistic50" and not quick else n)
    d = [x.shape[1] for x in jax.tree.leaves(data) if x.ndim == 2][0]  # D, without compiling anything
    call = lambda: cj.coreset(model, data, size=10 * d, method="omp", key=key).weights
elif kind == "sample":
    m, d = map(int, what.split("x"))
    model, data = synthetic_logistic(100_000 if not quick else 5_000, d)
    cs = cj.coreset(model, data, size=m, method="uniform", key=key)
    steps = 150 if quick else 500
    call = lambda: cj.sample(model, data, key, weights=cs, num_samples=steps, num_warmup=steps, warn=False).samples
elif kind == "full":
    model, data = synthetic_logistic(100_000 if not quick else 5_000, 11)
    call = lambda: cj.sample(model, data, key, num_samples=200, num_warmup=200, warn=False).samples
elif kind == "laplace":
    model, data = _problem(what, n)
    call = lambda: cj.laplace(model, data).mean
else:
    model, data = _problem(what, n)
    cs = cj.coreset(model, data, size=100, method="omp", key=key)
    post = cj.sample(model, data, key, weights=cs, num_samples=500, num_warmup=500, warn=False)
    call = lambda: cj.certify(model, data, cs, post.samples, precision="float64").kl
times = []
for _ in range(2):
    t = time.perf_counter()
    out = jax.block_until_ready(call())
    times.append(time.perf_counter() - t)
print("JSON" + json.dumps({"first_s": times[0], "second_s": times[1], "checksum": float(jnp.sum(jnp.asarray(out)))}))
"""

ENV = {"xla": {"CORESETS_JAX_LEGACY_EMITTERS": "0"}, "ours": {},
       "all": {"XLA_FLAGS": "--xla_cpu_use_fusion_emitters=false"}}


def _real_absent(row: str) -> bool:
    name = row.split(":")[1]
    return name.endswith("_large") and common.data_path(name + ".npz") is None


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--repeats", type=int, default=2, help="processes of each row and arm")
        p.add_argument("--rows", nargs="+", default=None, choices=ROWS)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    rows = [r for r in (args.rows or (QUICK_ROWS if args.quick else ROWS)) if not _real_absent(r)]
    repeats = 1 if args.quick else args.repeats
    code = f"QUICK_N, ROUTE_N = {QUICK_N}, {ROUTE_N}\n" + CHILD
    runs = {row: {arm: [] for arm in ARMS} for row in rows}
    for _ in range(repeats):
        for row in rows:
            for arm in ARMS:
                env = dict(ENV[arm])
                if arm != "all" and "XLA_FLAGS" in os.environ:
                    env["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
                r = common.child(code, row, int(bool(args.quick)), env=env)
                runs[row][arm].append(r)
                print(f"{row:<28} {arm:<4}: first {r['first_s']:6.2f} s   compiled {r['second_s']:7.3f} s   "
                      f"checksum {r['checksum']:.6g}", flush=True)
    table = {}
    for row in rows:
        med = common.first_second_medians(runs[row])
        table[row] = dict(med, **{f"{arm}_{part}_ratio": med[arm][f"{part}_s"] / med["xla"][f"{part}_s"]
                                  for arm in ("ours", "all") for part in ("first", "second")})
        print(f"{row:<28} first {med['xla']['first_s']:.2f} -> ours {med['ours']['first_s']:.2f} / all "
              f"{med['all']['first_s']:.2f} s; compiled {med['xla']['second_s']:.3f} -> ours "
              f"{med['ours']['second_s']:.3f} / all {med['all']['second_s']:.3f} s")
    report = {"quick": bool(args.quick), "environment": common.environment(),
              "what": "XLA:CPU's classic fusion emitters against its default: first and compiled calls in fresh "
                      "processes with empty caches, medians; arms xla (defaults), ours (the package's rule), "
                      "all (every program of the process); ratios are over xla",
              "repeats": repeats, "table": table, "runs": runs, "load_average_end": os.getloadavg()[0]}
    stem = common.stem("cpu_emitters", args.quick)
    print("wrote", common.write_json(report, args.out, stem))
    plot(report, args.out, stem)
    return report


def plot(report, out_dir, stem):
    fig, axes = common.figure(1, 2, size=(11.0, 3.8))
    rows = list(report["table"])
    for ax, part, title in ((axes[0][0], "first", "first call / XLA defaults' (compilation included)"),
                            (axes[0][1], "second", "compiled call / XLA defaults'")):
        common.grouped_bars(ax, rows, {arm: [report["table"][r][f"{arm}_{part}_ratio"] for r in rows]
                                       for arm in ("ours", "all")}, "ratio (median)", title)
        ax.axhline(1.0, color="k", lw=0.8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
