"""First `cj.coreset` call of a NumPyro model (through `cj.from_numpyro`) against the built-in model.

Logistic regression on HC §7.2's synthetic data (N = 10,000, D = 3), `cj.coreset(..., size=100)` with the
defaults (Laplace pi_hat, Fisher features, J = 500, Frank–Wolfe). Each measurement runs in a fresh Python
process, so every compilation is included; built-in and NumPyro runs alternate. Reports per process: the
time of `from_numpyro` (0 for the built-in), of the first `cj.coreset` call, and of a second call.
Writes results/numpyro_first_call.{json,png} (*_quick.* with --quick: one process of each).

    python benchmarks/investigations/numpyro_first_call.py [--quick] [--repeats 3]
"""

from __future__ import annotations

import os
import statistics
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402

CHILD = r"""
import json, sys, time
import jax, jax.numpy as jnp
import coresets_jax as cj
kind = sys.argv[1]
key = jax.random.key(0)
X, y = cj.data.synthetic_logistic(key, 10_000).train
jax.block_until_ready((X, y))
start = time.perf_counter()
if kind == "numpyro":
    import numpyro, numpyro.distributions as dist

    def logreg(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    model, data = cj.from_numpyro(logreg, X, y=((y + 1) / 2).astype(jnp.int32))
else:
    model, data = cj.models.logistic_regression(), (X, y)
bridge = time.perf_counter() - start
start = time.perf_counter()
cs = cj.coreset(model, data, size=100, key=key)
jax.block_until_ready(cs.weights)
first = time.perf_counter() - start
start = time.perf_counter()
jax.block_until_ready(cj.coreset(model, data, size=100, key=key).weights)
second = time.perf_counter() - start
print("JSON" + json.dumps({"bridge_s": bridge, "first_s": first, "second_s": second,
                           "indices": sorted(int(i) for i in cs.indices[cs.weights > 0])}))
"""


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__,
                          lambda p: p.add_argument("--repeats", type=int, default=3, help="processes of each"))
    repeats = 1 if args.quick else args.repeats
    runs = {"builtin": [], "numpyro": []}
    for _ in range(repeats):
        for kind in ("builtin", "numpyro"):  # alternating, each in a fresh process (progress bars off)
            runs[kind].append(common.child(CHILD, kind))
            r = runs[kind][-1]
            print(f"{kind:<8} from_numpyro {r['bridge_s']:.2f} s   first coreset {r['first_s']:.2f} s   "
                  f"second {r['second_s']:.3f} s", flush=True)
    summary = {}
    for kind, rs in runs.items():
        summary[kind] = {k: statistics.median(r[k] for r in rs) for k in ("bridge_s", "first_s", "second_s")}
    same = all(r["indices"] == runs["builtin"][0]["indices"] for r in runs["numpyro"])
    total_np = summary["numpyro"]["bridge_s"] + summary["numpyro"]["first_s"]
    report = {
        "quick": bool(args.quick), "environment": common.environment(),
        "what": "fresh process each: from_numpyro + first cj.coreset (compilation included) vs the built-in "
                "logistic regression; N = 10,000, size 100, defaults",
        "median": summary,
        "ratio_first_call": summary["numpyro"]["first_s"] / summary["builtin"]["first_s"],
        "ratio_bridge_plus_first_call": total_np / summary["builtin"]["first_s"],
        "same_coreset_support": same,
        "runs": {k: [{kk: v for kk, v in r.items() if kk != "indices"} for r in rs] for k, rs in runs.items()},
        "load_average_end": os.getloadavg()[0],
    }
    print(f"median first call: built-in {summary['builtin']['first_s']:.2f} s, NumPyro "
          f"{summary['numpyro']['first_s']:.2f} s (+ from_numpyro {summary['numpyro']['bridge_s']:.2f} s); "
          f"ratio {report['ratio_first_call']:.2f}; same support: {same}")
    stem = common.stem("numpyro_first_call", args.quick)
    print("wrote", common.write_json(report, args.out, stem))
    plot(report, args.out, stem)
    return report


def plot(report, out_dir, stem):
    fig, axes = common.figure(1, 1, size=(5.0, 3.2))
    ax = axes[0][0]
    kinds = list(report["median"])
    bottom = [0.0] * len(kinds)
    for part, label in (("bridge_s", "cj.from_numpyro"), ("first_s", "first cj.coreset call")):
        values = [report["median"][k][part] for k in kinds]
        ax.bar(kinds, values, 0.5, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_ylabel("seconds in a fresh process (median)")
    ax.set_title(f"first call: NumPyro / built-in x{report['ratio_first_call']:.2f}", fontsize=10)
    ax.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
