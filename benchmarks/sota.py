"""Posterior-driven coresets (Coreset MCMC, quasi-Newton, Sparse VI) against the Hilbert methods (issue 12).

For each problem: two independent full-data NUTS runs (their W1 is the Monte Carlo noise floor), then for
each method and coreset size M: construct the coreset (pi_hat, projection and solver, or the posterior-
driven loop; compilation included), sample its posterior with NUTS (Coreset MCMC returns its own draws,
`info["samples"]`, so it needs no second run), and measure
  - moment-matched KL: KL(N(full moments) || N(coreset moments)) between sample moments;
  - W1 to the first full-data run, divided by the noise floor;
  - the coreset posterior's mode (Laplace of pi_w) against the full-data mode, in full-data posterior sd
    (max over coordinates);
  - wall time of construction and of sampling;
  - the one-pass certificate (`cj.certify`, issue 22) from the same draws: PSIS k-hat and the estimate of
    KL(pi_w || pi), which need no full-data MCMC, beside the metrics above that do.

Writes results/sota{tag}.json and .png (KL and normalised W1 against M and against total time; *_quick.* with
--quick), after every row so that an interrupted run keeps what it measured.

    python benchmarks/sota.py --quick                     # seconds-to-minutes smoke run
    python benchmarks/sota.py [--problems synth_logistic biketrips_large] [--n 100000] [--sizes 50 200]
                              [--samples 500] [--warmup 500] [--tag _x]
Real data sets are read from --data-dir (default $CORESETS_DATA, else ../shared/data); the package does not
depend on them.
"""

from __future__ import annotations

import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

METHODS = ("uniform", "giga", "iht2", "omp", "sparse_vi", "quasi_newton", "coreset_mcmc")
HILBERT = ("giga", "iht2", "omp")
POSTERIOR = ("sparse_vi", "quasi_newton", "coreset_mcmc")
REAL = {"phishing": "logistic", "ds1": "logistic", "biketrips_large": "poisson",
        "airportdelays_large": "poisson"}


def load_problem(name: str, n: int, data_dir: str):
    if name == "synth_logistic":
        return cj.models.logistic_regression(), cj.data.synthetic_logistic(jax.random.key(0), n).train
    if name == "synth_poisson":
        return cj.models.poisson_regression(), cj.data.synthetic_poisson(jax.random.key(0), n).train
    kind = REAL[name]
    ds = cj.load_npz(os.path.join(data_dir, name + ".npz"))
    model = cj.models.logistic_regression() if kind == "logistic" else cj.models.poisson_regression()
    return model, (ds.X, ds.y)


def method_options(method: str, n: int, quick: bool, samples: int) -> dict:
    """The package defaults (issue 21: what a new user gets), with caps for --quick and draws to match
    --samples."""
    if method == "coreset_mcmc":
        return dict(num_iters=500, num_draws=max(samples // 2, 1)) if quick else dict(num_draws=max(samples // 2, 1))
    if method == "quasi_newton":
        return dict(num_iters=5) if quick else {}
    if method == "sparse_vi":
        return dict(num_draws=20, num_iters=20, kernel="mala", num_warmup=50, step_scale=0.1)
    return {}


def moments(x):
    x = np.asarray(x, np.float64)
    return x.mean(0), np.cov(x, rowvar=False)


def polished_mode(model, rows, weights, theta, steps: int = 5):
    """Pure Newton steps theta <- theta - H^{-1} g on sum_m w_m L_m + log prior, from a point near the mode.

    A line search compares objective values, which float32 resolves only to ~eps |f|; the gradient is a sum
    of terms that cancel at the mode and keeps its resolution, so these steps reach the mode to ~eps
    relative, where the objective's own fit stalls."""
    density = cj.weighted_log_density(model, rows, jnp.asarray(weights, jnp.float32))
    grad, hess = jax.jit(jax.grad(density)), jax.jit(jax.hessian(density))
    theta = jnp.asarray(theta, jnp.float32)
    for _ in range(steps):
        step = jnp.linalg.solve(hess(theta), grad(theta))
        if not bool(jnp.all(jnp.isfinite(step))):
            break
        theta = theta - step
    return np.asarray(theta, np.float64)


def max_sd_distance(theta, ref) -> float:
    return float(np.max(np.abs(theta - ref["mode"]) / ref["sd"]))


def coreset_metrics(model, data, weights, draws, ref) -> dict:
    """Each metric on its own, so that one failure (e.g. a singular sample covariance from a stuck chain) is
    recorded under `errors` without hiding the others."""
    out, errors = {}, {}
    mean_c, cov_c = moments(draws)

    def mode_distance():
        # Newton from the full-data mode: the coreset's mode is near it when the coreset is any good, and a
        # start at zero can overflow exp on count data (Poisson) in float32. Then polish on the gradient:
        # at N = 10^6 a float32 objective cannot resolve moves under ~0.2 sd, so the line-searched fit
        # alone stops early.
        fit = cj.laplace(model, data, weights=weights, init=jnp.asarray(ref["mode"], jnp.float32))
        live = np.flatnonzero(np.asarray(weights) > 0)
        rows = jax.tree_util.tree_map(lambda a: a[live], data)
        return max_sd_distance(polished_mode(model, rows, np.asarray(weights)[live], fit.mean), ref)

    for key, fn in (("mm_kl", lambda: float(cj.metrics.gaussian_kl(ref["mean"], ref["cov"], mean_c, cov_c))),
                    ("w1_normalised", lambda: float(cj.metrics.normalized_wasserstein1(cj.metrics.wasserstein1(ref["full"], draws), ref["floor"]))),
                    ("map_distance_sd", mode_distance)):
        try:
            value = fn()
            if not np.isfinite(value):
                raise FloatingPointError(f"{key} is {value}")
            out[key] = value
        except Exception as err:
            errors[key] = f"{type(err).__name__}: {err}"
    if errors:
        out["errors"] = errors
    return out


def run_problem(name, args, log, save):
    model, data = load_problem(name, args.n, args.data_dir)
    n = int(data[0].shape[0])
    log(f"== {name}: N = {n}, D = {data[0].shape[1]}")
    sample = lambda key, weights=None: cj.sample(model, data, key, weights=weights, num_samples=args.samples,
                                                 num_warmup=args.warmup, num_chains=2, warn=False)
    cache = os.path.join(args.out, "tmp", f"sota_ref_{name}_{n}_{args.samples}_{args.warmup}.npz")
    if args.cached_reference and os.path.exists(cache):  # full-data draws and time of an earlier run
        z = np.load(cache)
        full_a, full_b, t_full = z["a"], z["b"], float(z["seconds"])
        log(f"   full-data NUTS draws and time from {cache} (an earlier run; its load may differ)")
    else:
        t = common.time_fn(lambda: sample(jax.random.key(100)).samples, repeats=0)  # compilation included
        full_a, t_full = t["output"], t["compile_s"]
        full_b = common.block(sample(jax.random.key(101)).samples)
        full_a = np.asarray(full_a).reshape(-1, full_a.shape[-1])
        full_b = np.asarray(full_b).reshape(-1, full_b.shape[-1])
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        np.savez(cache, a=full_a, b=full_b, seconds=t_full)
    floor = cj.metrics.wasserstein1(full_a, full_b)
    mean_f, cov_f = moments(np.concatenate([full_a, full_b]))
    sd_f = np.sqrt(np.diag(cov_f))
    map_f = polished_mode(model, data, np.ones(n), cj.laplace(model, data).mean)
    reference = dict(full=full_a, floor=floor, mean=mean_f, cov=cov_f, sd=sd_f, mode=map_f)
    log(f"   full-data NUTS {t_full:.1f} s, W1 floor {floor:.4g}")
    rows = []
    summary = dict(problem=name, N=n, D=int(data[0].shape[1]), full_nuts_s=t_full, w1_floor=float(floor),
                   full_nuts_cached=bool(args.cached_reference and os.path.exists(cache)), rows=rows)
    for method in args.methods:
        if method == "sparse_vi" and n > args.sparse_vi_max_n:
            log(f"   {method}: skipped (N > {args.sparse_vi_max_n}: O(N) per weight iteration)")
            continue
        opts = method_options(method, n, args.quick, args.samples)
        for size in args.sizes:
            if size > n:
                continue
            key = jax.random.key(size)
            # with --warm, each call is timed again, compiled: what a user pays on the second data set
            repeats = 1 if args.warm else 0
            try:
                build = common.time_fn(lambda: cj.coreset(model, data, size, method, key=key, **opts),
                                       repeats=repeats)
                cs = build["output"]
                if method == "coreset_mcmc":
                    draw = lambda: cs.info["samples"]  # its own draws: no second run
                else:
                    draw = lambda: sample(jax.random.key(7 + size), cs).samples
                sampling = common.time_fn(draw, repeats=repeats)
                draws = sampling["output"]
                row = dict(problem=name, method=method, size=size, num_points=int(cs.num_points),
                           build_s=build["compile_s"], sample_s=sampling["compile_s"],
                           total_s=build["compile_s"] + sampling["compile_s"], options=opts)
                if args.warm:
                    row.update(build_warm_s=build["median_s"], sample_warm_s=sampling["median_s"],
                               total_warm_s=build["median_s"] + sampling["median_s"])
            except Exception as err:  # record, keep going: one failing method must not hide the others
                row = dict(problem=name, method=method, size=size, error=f"{type(err).__name__}: {err}")
            else:
                try:  # issue 22: the one-pass certificate beside the metrics that need full-data NUTS
                    cert = cj.certify(model, data, cs, np.asarray(draws))
                    row.update(khat=cert.khat, kl_estimate=cert.kl, kl_estimate_se=cert.kl_se,
                               verdict=cert.verdict, spread=cert.spread, certify_s=cert.time_s)
                except ValueError as err:
                    row.setdefault("errors", {})["certificate"] = f"ValueError: {err}"
                draws = np.asarray(draws, np.float64).reshape(-1, draws.shape[-1])
                metrics = coreset_metrics(model, data, cs.dense(n), draws, reference)
                row.setdefault("errors", {}).update(metrics.pop("errors", {}))
                row.update(metrics)
                if not row["errors"]:
                    row.pop("errors")
            rows.append(row)
            save(summary)  # partial results survive an interrupted run
            log("   " + json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                                    if k != "options"}))
    return summary


def plot(results, out_dir, stem):
    import matplotlib.ticker

    probs = results["problems"]
    panels = [("size", "mm_kl", "moment KL vs M"), ("size", "w1_normalised", "W1 / floor vs M"),
              ("size", "map_distance_sd", "mode distance (posterior sd) vs M"),
              ("total_s", "mm_kl", "moment KL vs total time"), ("total_s", "w1_normalised", "W1 / floor vs total time")]
    fig, axes = common.figure(len(probs), len(panels), size=(4.2, 3.6))
    for r, prob in enumerate(probs):
        for method in METHODS:
            style = "-o" if method in POSTERIOR else "--s"
            for c, (xkey, ykey, _) in enumerate(panels):
                rows = [x for x in prob["rows"] if x["method"] == method and ykey in x]
                if rows:  # one colour per method in every panel
                    axes[r, c].plot([x[xkey] for x in rows], [max(x[ykey], 1e-6) for x in rows], style,
                                    label=method, color=f"C{METHODS.index(method)}")
        for c, (xkey, ykey, title) in enumerate(panels):
            ax = axes[r, c]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # minor labels overlap
            if xkey == "size":  # label the sizes that were run
                ax.set_xticks(sorted({x["size"] for x in prob["rows"]}))
                ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_title(f"{prob['problem']} (N={prob['N']}): {title}", fontsize=9)
            ax.set_xlabel("M" if xkey == "size" else "construction + sampling (s), compilation included")
            if xkey == "total_s":
                ax.axvline(prob["full_nuts_s"], color="k", lw=0.8, ls=":")
            if ykey == "w1_normalised" or ykey == "map_distance_sd":
                ax.axhline(1.0, color="k", lw=0.8, ls=":")
        axes[r, 0].legend(fontsize=7)
    env = results["environment"]
    fig.suptitle(f"{env['backend']} ({env['device_kind']}), {env['cpu_count']} logical cores", fontsize=9)
    common.save_figure(fig, out_dir, stem)


def _extra(p):
    p.add_argument("--problems", nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=list(METHODS))
    p.add_argument("--n", type=int, default=100_000, help="rows of the synthetic problems")
    p.add_argument("--sizes", nargs="+", type=int, default=None)
    p.add_argument("--samples", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--sparse-vi-max-n", type=int, default=5000)
    p.add_argument("--data-dir", default=common.DATA_DIR)
    p.add_argument("--tag", default="", help="suffix of the output file names")
    p.add_argument("--cached-reference", action="store_true",
                   help="reuse the full-data NUTS draws and time saved by an earlier run (<out>/tmp)")
    p.add_argument("--warm", action="store_true",
                   help="also time each construction and sampling a second time, compiled")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    if args.quick:
        args.problems = args.problems or ["synth_logistic"]
        args.n = min(args.n, 1000)
        args.sizes = args.sizes or [20]
        args.samples, args.warmup = args.samples or 100, args.warmup or 100
    else:
        args.problems = args.problems or ["synth_logistic", "biketrips_large"]
        args.sizes = args.sizes or [50, 200]
        args.samples, args.warmup = args.samples or 500, args.warmup or 500
    command = sys.argv[1:] if argv is None else list(argv)
    results = dict(quick=bool(args.quick), environment=common.environment(),
                   command=" ".join(["python benchmarks/sota.py"] + command), config=vars(args), problems=[])
    start = time.perf_counter()
    stem = common.stem(f"sota{args.tag}", args.quick)

    def save(current):
        done = [p for p in results["problems"] if p["problem"] != current["problem"]]
        out = dict(results, problems=done + [current], wall_s=time.perf_counter() - start)
        common.write_json(out, args.out, stem)
        plot(out, args.out, stem)

    for name in args.problems:
        results["problems"].append(run_problem(name, args, lambda s: print(s, flush=True), save))
    results["wall_s"] = time.perf_counter() - start
    path = common.write_json(results, args.out, stem)
    plot(results, args.out, stem)
    print(f"wrote {path} and .png in {results['wall_s']:.0f} s", flush=True)
    return results


if __name__ == "__main__":
    main()
