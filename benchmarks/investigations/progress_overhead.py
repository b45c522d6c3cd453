"""How much progress reporting slows long work: the same work with progress on and off.

Three loops, each timed after compilation, alternating on/off runs, medians over `--trials` pairs (15, 7
for sampling; --quick: 5):
- solver: Frank–Wolfe, 200 iterations (the shared `run` driver, a tick every 2^30 / (N J) iterations);
- projection: `cj.project` (Fisher, logistic regression) at a size that shows a bar (N J D >= 2^29), a
  tick every 2^28 rows x J x D of work;
- sampling: `cj.sample` on the full data (2 chains, warm-up and sampling bars, a tick every 5% of the
  steps): NUTS at N = 20,000, and RWMH (the cheapest step) at the smallest N that shows a bar (chains x
  steps x N x D >= 2^28), the worst case. Smaller runs trace no callback.
Progress "on" draws real tqdm bars (to stderr). Writes results/progress_overhead.{json,png} (*_quick.* with
--quick).

    python benchmarks/investigations/progress_overhead.py [--quick] 2>/dev/null
"""

from __future__ import annotations

import os
import sys

import jax
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # this checkout's coresets_jax, then common
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

# The size thresholds under which no bar is traced are module constants with no public switch: the study
# reads them, and --quick lowers them to 0 so that its small runs draw bars (restored at the end).
THRESHOLDS = ((cj.features.projection, "PROGRESS_MIN_WORK"), (cj.inference.driver, "PROGRESS_MIN_WORK"))


def compare(name, off, on, repeats, result_of=lambda out: out, inner=None) -> dict:
    """Time `off()` with progress off and `on()` with it on, alternating, each warmed up first (and so
    compiled, where it compiles, with its own setting). `inner(output)` is a call's own timing of its loop,
    reported beside the whole call."""
    last, loop = {}, {False: [], True: []}

    def switched(flag, fn):
        def call():
            cj.progress.enabled(flag)
            out = fn()
            if inner is not None:
                loop[flag].append(inner(out))
            last[flag] = result_of(out)
            return last[flag]
        return call

    t = common.alternate({"off": switched(False, off), "on": switched(True, on)}, repeats, runs=True)
    m_on, m_off = float(np.median(t["on"])), float(np.median(t["off"]))
    same = all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(last[True]),
                                                    jax.tree_util.tree_leaves(last[False])))
    row = {"loop": name, "median_on_s": m_on, "median_off_s": m_off, "ratio_of_medians": m_on / m_off,
           "median_pairwise_ratio": float(np.median(np.divide(t["on"], t["off"]))), "repeats": repeats,
           "identical_results": bool(same)}
    if inner is not None:  # the first entry of each is the warm-up call's
        row["loop_median_on_s"] = float(np.median(loop[True][1:]))
        row["loop_median_off_s"] = float(np.median(loop[False][1:]))
        row["loop_ratio_of_medians"] = row["loop_median_on_s"] / row["loop_median_off_s"]
    print(f"{name:<34} off {m_off * 1e3:8.2f} ms   on {m_on * 1e3:8.2f} ms   ratio {m_on / m_off:.3f} "
          f"(pairwise median {row['median_pairwise_ratio']:.3f}; identical results: {same})", flush=True)
    return row


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__)
    saved = [getattr(module, name) for module, name in THRESHOLDS]
    try:
        if args.quick:
            for module, name in THRESHOLDS:
                setattr(module, name, 0)
        return measure(args)
    finally:
        for (module, name), value in zip(THRESHOLDS, saved):
            setattr(module, name, value)
        cj.progress.enabled(None)


def measure(args) -> dict:
    quick = args.quick
    repeats = args.trials or (5 if quick else 15)
    n, j = (20_000, 200) if quick else (100_000, 500)
    key = jax.random.key(0)
    data = cj.data.synthetic_logistic(key, n).train
    model = cj.models.logistic_regression()
    thetas = cj.laplace(model, data).sample(key, j)
    V = cj.project(model, data, thetas, key=key)
    rows = []

    # The solver driver itself, jitted twice so that each copy is traced with its own setting.
    solver = cj.registry.resolve("frank_wolfe").make(200)
    on, off = (jax.jit(lambda V, k: cj.solvers.run(solver, cj.solvers.make_problem(V), k)) for _ in range(2))
    rows.append(compare("solver", lambda: off(V, key), lambda: on(V, key), repeats))

    # Projection through the public function, at a size that shows a bar.
    n_proj = 100_000 if quick else 400_000
    proj_data = cj.data.synthetic_logistic(jax.random.key(1), n_proj).train
    project = lambda: cj.project(model, proj_data, thetas, key=key)
    rows.append(compare("projection", project, project, repeats))
    rows[-1].update(n=n_proj, bar_shown=n_proj * j * 3 >= cj.features.projection.PROGRESS_MIN_WORK)

    # Full-data MCMC through `cj.sample` (compiled once per progress setting): NUTS at a typical size, and
    # the cheapest kernel (RWMH, no gradient) at the smallest size that shows a bar, the worst case.
    min_work = cj.inference.driver.PROGRESS_MIN_WORK
    cases = [("sampling (nuts)", "nuts", 5_000 if quick else 20_000, (100, 100) if quick else (500, 500)),
             ("sampling (rwmh, at the threshold)", "rwmh", 5_000 if quick else -(-min_work // (2 * 2000 * 3)),
              (100, 100) if quick else (1000, 1000))]
    sample_repeats = args.trials or (5 if quick else 7)
    for name, method, n_mcmc, steps in cases:
        mcmc_data = cj.data.synthetic_logistic(jax.random.key(2), n_mcmc).train
        sample = (lambda d=mcmc_data, m=method, st=steps:
                  cj.sample(model, d, key, method=m, num_warmup=st[0], num_samples=st[1], warn=False))
        rows.append(compare(name, sample, sample, sample_repeats, result_of=lambda post: post.samples,
                            inner=lambda post: post.wall_time))
        rows[-1].update(n=n_mcmc, num_warmup=steps[0], num_samples=steps[1], chains=2,
                        bar_shown=2 * sum(steps) * n_mcmc * 3 >= min_work)

    report = {
        "quick": bool(quick), "environment": common.environment(),
        "what": "time of the same jitted loop compiled with progress on (tqdm via jax.debug.callback) and "
                "off; medians after compilation, runs alternating",
        "settings": {"n_solver": n, "num_features": j, "frank_wolfe_iterations": 200, "repeats": repeats,
                     "quick": quick, "projection_min_work": cj.features.projection.PROGRESS_MIN_WORK,
                     "projection_work_per_report": cj.features.projection.PROGRESS_WORK_PER_REPORT,
                     "sampling_min_work": min_work},
        "results": rows,
        "load_average_end": os.getloadavg()[0],
    }
    stem = common.stem("progress_overhead", quick)
    print("wrote", common.write_json(report, args.out, stem))
    plot(report, args.out, stem)
    return report


def plot(report, out_dir, stem):
    rows = report["results"]
    fig, axes = common.figure(1, 1, size=(6.0, 3.2))
    ax = axes[0][0]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["ratio_of_medians"] for r in rows], 0.4, label="median on / median off")
    ax.bar(x + 0.2, [r["median_pairwise_ratio"] for r in rows], 0.4, label="median of paired on / off")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [r["loop"] for r in rows], rotation=15, ha="right", fontsize=8)
    ax.set(ylabel="time with progress / without", title="cost of progress reporting")
    ax.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
