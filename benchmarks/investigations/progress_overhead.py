"""How much progress reporting slows long work: the same work with progress on and off.

Three loops, each timed after compilation, alternating on/off runs, medians over `--repeats` pairs:
- solver: Frank–Wolfe, 200 iterations (the shared `run` driver, a tick every 2^30 / (N J) iterations);
- projection: `cj.project` (Fisher, logistic regression) at a size that shows a bar (N J D >= 2^29), a
  tick every 2^28 rows x J x D of work;
- sampling: `cj.sample` on the full data (2 chains, warm-up and sampling bars, a tick every 5% of the
  steps): NUTS at N = 20,000, and RWMH (the cheapest step) at the smallest N that shows a bar (chains x
  steps x N x D >= 2^28), the worst case. Smaller runs trace no callback.
Progress "on" draws real tqdm bars (to stderr). Writes benchmarks/results/progress_overhead.json.

    python benchmarks/investigations/progress_overhead.py [--quick] 2>/dev/null
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
from coresets_jax import progress, projection
from coresets_jax.inference import driver
from coresets_jax.registry import resolve
from coresets_jax.solvers import make_problem, run

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file: benchmarks/investigations/)


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
    print(f"{name:<34} off {m_off * 1e3:8.2f} ms   on {m_on * 1e3:8.2f} ms   ratio {m_on / m_off:.3f} "
          f"(pairwise median {row['median_pairwise_ratio']:.3f})", flush=True)
    return row


def compare_calls(name, call, repeats, result_of, inner=None):
    """Alternating timed calls of a public function with progress on and off (each warmed up first);
    `inner(result)` is the function's own timing of its loop, reported beside the whole call."""
    outs = {}
    for flag in (True, False):
        progress.enabled(flag)
        outs[flag] = result_of(call())
    same = bool(jnp.array_equal(outs[True], outs[False]))
    t = {True: [], False: []}
    loop = {True: [], False: []}
    for _ in range(repeats):
        for flag in (False, True):
            progress.enabled(flag)
            start = time.perf_counter()
            out = call()
            jax.block_until_ready(result_of(out))
            t[flag].append(time.perf_counter() - start)
            if inner is not None:
                loop[flag].append(inner(out))
    m_on, m_off = statistics.median(t[True]), statistics.median(t[False])
    ratios = [a / b for a, b in zip(t[True], t[False])]
    row = {"loop": name, "median_on_s": m_on, "median_off_s": m_off, "ratio_of_medians": m_on / m_off,
           "median_pairwise_ratio": statistics.median(ratios), "repeats": repeats,
           "identical_results": same}
    if inner is not None:
        row["loop_median_on_s"] = statistics.median(loop[True])
        row["loop_median_off_s"] = statistics.median(loop[False])
        row["loop_ratio_of_medians"] = row["loop_median_on_s"] / row["loop_median_off_s"]
    print(f"{name:<34} off {m_off * 1e3:8.2f} ms   on {m_on * 1e3:8.2f} ms   ratio {m_on / m_off:.3f} "
          f"(pairwise median {row['median_pairwise_ratio']:.3f}; identical results: {same})", flush=True)
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

    # Projection through the public function, at a size that shows a bar.
    n_proj = 100_000 if quick else 400_000
    proj_data = cj.data.synthetic_logistic(jax.random.key(1), n_proj).train
    if quick:
        projection.PROGRESS_MIN_WORK = 0
    shows = n_proj * j * 3 >= projection.PROGRESS_MIN_WORK
    project = lambda: cj.project(model, proj_data, thetas, key=key)
    rows.append(compare_calls("projection", project, repeats, lambda out: out))
    rows[-1].update(n=n_proj, bar_shown=shows)

    # Full-data MCMC through `cj.sample` (compiled once per progress setting): NUTS at a typical size, and
    # the cheapest kernel (RWMH, no gradient) at the smallest size that shows a bar, the worst case.
    if quick:
        driver.PROGRESS_MIN_WORK = 0
    cases = [("sampling (nuts)", "nuts", 5_000 if quick else 20_000, (100, 100) if quick else (500, 500)),
             ("sampling (rwmh, at the threshold)", "rwmh",
              5_000 if quick else -(-driver.PROGRESS_MIN_WORK // (2 * 2000 * 3)),
              (100, 100) if quick else (1000, 1000))]
    for name, method, n_mcmc, steps in cases:
        mcmc_data = cj.data.synthetic_logistic(jax.random.key(2), n_mcmc).train
        shows = 2 * sum(steps) * n_mcmc * 3 >= driver.PROGRESS_MIN_WORK
        sample = (lambda d=mcmc_data, m=method, st=steps:
                  cj.sample(model, d, key, method=m, num_warmup=st[0], num_samples=st[1], warn=False))
        rows.append(compare_calls(name, sample, repeats if quick else 7, lambda post: post.samples,
                                  inner=lambda post: post.wall_time))
        rows[-1].update(n=n_mcmc, num_warmup=steps[0], num_samples=steps[1], chains=2, bar_shown=shows)
    progress.enabled(None)

    report = {
        "what": "time of the same jitted loop compiled with progress on (tqdm via jax.debug.callback) and "
                "off; medians after compilation, runs alternating",
        "settings": {"n_solver": n, "num_features": j, "frank_wolfe_iterations": 200, "repeats": repeats,
                     "quick": quick,
                     "projection_min_work": projection.PROGRESS_MIN_WORK,
                     "projection_work_per_report": projection.PROGRESS_WORK_PER_REPORT,
                     "sampling_min_work": driver.PROGRESS_MIN_WORK},
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
