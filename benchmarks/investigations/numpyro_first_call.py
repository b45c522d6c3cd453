"""First `cj.coreset` call of a NumPyro model (through `cj.from_numpyro`) against the built-in model.

Logistic regression on HC §7.2's synthetic data (N = 10,000, D = 3), `cj.coreset(..., size=100)` with the
defaults (Laplace pi_hat, Fisher features, J = 500, Frank–Wolfe). Each measurement runs in a fresh Python
process, so every compilation is included; built-in and NumPyro runs alternate. Reports per process: the
time of `from_numpyro` (0 for the built-in), of the first `cj.coreset` call, and of a second call.
Writes benchmarks/results/numpyro_first_call.json.

    python benchmarks/investigations/numpyro_first_call.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file: benchmarks/investigations/)

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
print(json.dumps({"bridge_s": bridge, "first_s": first, "second_s": second,
                  "indices": sorted(int(i) for i in cs.indices[cs.weights > 0])}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one process of each")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    runs = {"builtin": [], "numpyro": []}
    env = dict(os.environ, CORESETS_JAX_PROGRESS="0")
    root = os.path.dirname(HERE)
    for _ in range(repeats):
        for kind in ("builtin", "numpyro"):
            out = subprocess.run([sys.executable, "-c", CHILD, kind], capture_output=True, text=True, env=env,
                                 cwd=root, check=True)
            runs[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
            r = runs[kind][-1]
            print(f"{kind:<8} from_numpyro {r['bridge_s']:.2f} s   first coreset {r['first_s']:.2f} s   "
                  f"second {r['second_s']:.3f} s", flush=True)
    summary = {}
    for kind, rs in runs.items():
        summary[kind] = {k: statistics.median(r[k] for r in rs) for k in ("bridge_s", "first_s", "second_s")}
    same = all(r["indices"] == runs["builtin"][0]["indices"] for r in runs["numpyro"])
    total_np = summary["numpyro"]["bridge_s"] + summary["numpyro"]["first_s"]
    report = {
        "what": "fresh process each: from_numpyro + first cj.coreset (compilation included) vs the built-in "
                "logistic regression; N = 10,000, size 100, defaults",
        "median": summary,
        "ratio_first_call": summary["numpyro"]["first_s"] / summary["builtin"]["first_s"],
        "ratio_bridge_plus_first_call": total_np / summary["builtin"]["first_s"],
        "same_coreset_support": same,
        "runs": {k: [{kk: v for kk, v in r.items() if kk != "indices"} for r in rs] for k, rs in runs.items()},
        "device": f"CPU, shared 2-core machine (load average at the end {os.getloadavg()[0]:.1f})",
    }
    print(f"median first call: built-in {summary['builtin']['first_s']:.2f} s, NumPyro "
          f"{summary['numpyro']['first_s']:.2f} s (+ from_numpyro {summary['numpyro']['bridge_s']:.2f} s); "
          f"ratio {report['ratio_first_call']:.2f}; same support: {same}")
    path = os.path.join(HERE, "results", "numpyro_first_call.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print("wrote", path)


if __name__ == "__main__":
    main()
