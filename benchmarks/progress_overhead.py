"""How much progress reporting slows a jitted loop: the same loop compiled with progress on and off.

Three loops, each timed after compilation, alternating on/off runs, medians over `--repeats` pairs:
- solver: Frank–Wolfe, 200 iterations (the shared `run` driver, a tick every 2^30 / (N J) iterations);
- projection: Fisher projection of logistic regression (a tick per chunk of the default size);
- scan: an MCMC-like `lax.scan` of 1000 gradient steps of a logistic log density on 10,000 rows (full-data
  MCMC, where a bar is wanted; `progress.scan`, a tick every 5% of the steps).
Progress "on" draws real tqdm bars (to stderr). Writes benchmarks/results/progress_overhead.json.

    python benchmarks/progress_overhead.py [--quick] 2>/dev/null
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp

import coresets_jax as cj
from coresets_jax import progress
from coresets_jax.registry import resolve
from coresets_jax.solvers import make_problem, run

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def compiled(flag: bool, make):
    """A freshly traced jitted function built while progress is `flag`."""
    progress.enabled(flag)
    fn = jax.jit(make())
    return fn


def compare(name, make, args, repeats):
    on = compiled(True, make)
    jax.block_until_ready(on(*args))
    off = compiled(False, make)
    jax.block_until_ready(off(*args))
    t_on, t_off = [], []
    for _ in range(repeats):
        progress.enabled(False)
        t_off.append(timed(off, *args))
        progress.enabled(True)
        t_on.append(timed(on, *args))
    m_on, m_off = statistics.median(t_on), statistics.median(t_off)
    ratios = [a / b for a, b in zip(t_on, t_off)]
    row = {"loop": name, "median_on_s": m_on, "median_off_s": m_off, "ratio_of_medians": m_on / m_off,
           "median_pairwise_ratio": statistics.median(ratios), "repeats": repeats}
    print(f"{name:<11} off {m_off * 1e3:8.2f} ms   on {m_on * 1e3:8.2f} ms   ratio {m_on / m_off:.3f} "
          f"(pairwise median {row['median_pairwise_ratio']:.3f})", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller problems and fewer repeats")
    args = parser.parse_args()
    quick = args.quick
    repeats = 5 if quick else 15
    n, j = (20_000, 200) if quick else (100_000, 500)
    key = jax.random.key(0)
    data = cj.data.synthetic_logistic(key, n).train
    model = cj.models.logistic_regression()
    thetas = cj.laplace(model, data).sample(key, j)
    V = cj.project(model, data, thetas, key=key)
    rows = []

    solver = resolve("frank_wolfe").make(200)
    rows.append(compare("solver", lambda: (lambda V, k: run(solver, make_problem(V), k)), (V, key), repeats))

    coords = jax.random.randint(key, (j,), 0, 3)
    from coresets_jax.projection import _project
    from coresets_jax.projection import _default_chunk
    chunk = _default_chunk(j, 3)

    def make_projection():
        show = progress.is_enabled()
        return lambda d, t, c: _project(model, d, t, c, "fisher", chunk, jnp.float32, show)

    rows.append(compare("projection", make_projection, (data, thetas, coords), repeats))
    from coresets_jax.projection import PROGRESS_MIN_WORK
    rows[-1]["bar_shown_by_project"] = n * j * 3 >= PROGRESS_MIN_WORK  # smaller projections show none

    X, y = data
    X, y = X[:10_000], y[:10_000]
    grad = jax.grad(lambda th: cj.log_joint(model, th, (X, y)))
    steps = 1000

    def make_scan():
        def chain(theta0, keys):
            def step(theta, k):
                theta = theta + 1e-4 * grad(theta) + 1e-2 * jax.random.normal(k, theta.shape)
                return theta, theta[0]
            return progress.scan(step, theta0, keys, desc="sampling")
        return chain

    keys = jax.random.split(key, steps)
    rows.append(compare("scan", make_scan, (jnp.zeros(3), keys), repeats))
    progress.enabled(None)

    report = {
        "what": "time of the same jitted loop compiled with progress on (tqdm via jax.debug.callback) and "
                "off; medians after compilation, runs alternating",
        "settings": {"n": n, "num_features": j, "frank_wolfe_iterations": 200, "projection_chunk": chunk,
                     "scan_steps": steps, "scan_rows": int(X.shape[0]), "repeats": repeats, "quick": quick},
        "results": rows,
        "device": f"{jax.default_backend()}: {jax.devices()[0].device_kind}; shared 2-core CPU "
                  f"(load average at the end {os.getloadavg()[0]:.1f})",
        "versions": {"jax": jax.__version__, "python": platform.python_version()},
    }
    out = os.path.join(HERE, "results", "progress_overhead" + ("_quick" if quick else "") + ".json")
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print("wrote", out)


if __name__ == "__main__":
    main()
