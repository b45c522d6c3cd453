"""XLA's backend optimisation level for the loop programs (`compilation.LOOP_COMPILE`): level 1 against XLA's
default 2, first call (compilation included) and compiled call, in fresh processes. Result (2 repeats, quiet
machine): no gain, so the package keeps XLA's defaults (`LOOP_COMPILE` empty).

The loop programs are `cj.sample`'s sampler and the posterior-driven cores (`construct/posterior.py`): long
`while`/`scan` loops of small steps whose run time is the model's density evaluations. Rows (each a fresh
process with an empty persistent cache, progress bars off, the two levels alternating in every repeat):

- `sample:nuts`, `sample:mala`: the first and the second `cj.sample` (500 + 500, 2 chains) on a GIGA coreset
  of 100 rows of cold_start.py's N = 569, D = 31 logistic regression;
- `coreset:coreset_mcmc`, `coreset:quasi_newton`: the first and second `cj.coreset(size=100)` on that data;
- `full:nuts`, `full:mala`: full-data `cj.sample` on N = 10^5 rows, D = 11 (200 + 200), where the run time
  is a full pass over the data per density evaluation (a check that level 1 does not slow the arithmetic).

The compiled call is the second call with the same arguments; the weights or draws of both levels are
recorded as their sum, to show the runs did the same work. Writes results/compile_level.{json,png}
(*_quick.* with --quick: one repeat of `sample:nuts`).

    python benchmarks/investigations/compile_level.py [--quick] [--repeats 2] [--rows sample:nuts ...]
"""

from __future__ import annotations

import os
import statistics
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402
from cold_start import DATA  # noqa: E402  (the N = 569 problem's generator)

ROWS = ("sample:nuts", "sample:mala", "coreset:coreset_mcmc", "coreset:quasi_newton", "full:nuts", "full:mala")
QUICK_ROWS = ("sample:nuts",)
LEVELS = (2, 1)

CHILD = DATA + r"""
import json, sys, tempfile, time, warnings
import numpy as np
row, level = sys.argv[1], int(sys.argv[2])
import os
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # an empty persistent cache
import jax, jax.numpy as jnp
import coresets_jax as cj
cj.compilation.LOOP_COMPILE.clear()
cj.compilation.LOOP_COMPILE["xla_backend_optimization_level"] = level
warnings.simplefilter("ignore", RuntimeWarning)
kind, method = row.split(":")
model = cj.models.logistic_regression()
if kind == "full":
    rng = np.random.default_rng(0)
    n, d = 100_000, 11
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:, -1] = 1.0
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ rng.normal(size=d))), 1.0, -1.0).astype(np.float32)
else:
    X, y = breast_cancer_like()
data = (jnp.asarray(X), jnp.asarray(y))
key = jax.random.key(0)
if kind in ("sample", "full"):
    weights = cj.coreset(model, data, size=100, method="giga", key=key) if kind == "sample" else None
    steps = 500 if kind == "sample" else 200
    call = lambda: cj.sample(model, data, key, weights=weights, method=method, num_samples=steps,
                             num_warmup=steps).samples
else:
    call = lambda: cj.coreset(model, data, size=100, method=method, key=key).weights
times = []
for _ in range(2):
    t = time.perf_counter()
    out = jax.block_until_ready(call())
    times.append(time.perf_counter() - t)
print("JSON" + json.dumps({"first_s": times[0], "second_s": times[1], "checksum": float(jnp.sum(out))}))
"""


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--repeats", type=int, default=2, help="processes of each row and level")
        p.add_argument("--rows", nargs="+", default=None, choices=ROWS)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    rows = args.rows or (QUICK_ROWS if args.quick else ROWS)
    repeats = 1 if args.quick else args.repeats
    runs = {row: {level: [] for level in LEVELS} for row in rows}
    for _ in range(repeats):
        for row in rows:
            for level in LEVELS:
                r = common.child(CHILD, row, level)
                runs[row][level].append(r)
                print(f"{row:<22} level {level}: first {r['first_s']:6.2f} s   second {r['second_s']:7.3f} s   "
                      f"checksum {r['checksum']:.6g}", flush=True)
    table = {}
    for row in rows:
        med = {level: {k: statistics.median(r[k] for r in runs[row][level]) for k in ("first_s", "second_s")}
               for level in LEVELS}
        table[row] = {"level_2": med[2], "level_1": med[1],
                      "first_ratio": med[1]["first_s"] / med[2]["first_s"],
                      "second_ratio": med[1]["second_s"] / med[2]["second_s"]}
        print(f"{row:<22} first {med[2]['first_s']:.2f} -> {med[1]['first_s']:.2f} s "
              f"(x{table[row]['first_ratio']:.2f}); compiled {med[2]['second_s']:.3f} -> "
              f"{med[1]['second_s']:.3f} s (x{table[row]['second_ratio']:.2f})")
    report = {"quick": bool(args.quick), "environment": common.environment(),
              "what": "XLA backend optimisation level 1 against 2 for the sampler and posterior-driven programs; "
                      "fresh processes, empty persistent cache, medians; ratios are level 1 over level 2",
              "repeats": repeats, "table": table,
              "runs": {row: {f"level_{lv}": rs for lv, rs in by.items()} for row, by in runs.items()},
              "load_average_end": os.getloadavg()[0]}
    stem = common.stem("compile_level", args.quick)
    print("wrote", common.write_json(report, args.out, stem))
    plot(report, args.out, stem)
    return report


def plot(report, out_dir, stem):
    fig, axes = common.figure(1, 2, size=(9.0, 3.4))
    rows = list(report["table"])
    for ax, part, title in ((axes[0][0], "first_s", "first call (compilation included)"),
                            (axes[0][1], "second_s", "compiled call")):
        common.grouped_bars(ax, rows, {f"level {level}": [report["table"][r][f"level_{level}"][part] for r in rows]
                                       for level in (2, 1)}, "seconds (median)", title)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
