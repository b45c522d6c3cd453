"""Every construction on the same projected vectors (issue 3).

Synthetic logistic regression (HC §7.2: x ~ N(0, I_2), theta = [3, 3, 0]), Laplace pi_hat, J = 500 centred
L2 features (IHT §2: each row's mean over the samples removed, so the constant offset the plain L2 norm
penalises is gone; the Fisher norm would do too, but the IHT objective is stated for centred features).
For N in {10^4, 10^5} and M in {10, 50, 100, 500, 1000} it records the relative squared error
||sum v - V^T w||^2 / ||sum v||^2, the wall time after compilation (median of repeats) and the number of
selected points. Solvers run on the full V (compress=False), so the times are those of the solvers.

    .venv/bin/python benchmarks/solvers.py [--quick]
    .venv/bin/python benchmarks/solvers.py --sparse-vi   # adds Sparse VI at N = 10^4, M <= 100 (minutes)
    .venv/bin/python benchmarks/solvers.py --fidelity    # issue 11: results/fidelity.{json,png}, fidelity.py

writes benchmarks/results/solvers.json and benchmarks/results/solvers.png (solvers_quick.* with --quick) and
prints a table.
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
import numpy as np

import coresets_jax as cj

# (label, method, options): A-IHT II also from the zero start alone (Algorithm 3 as printed), to show what
# the default's second (GIGA) start buys and costs, and with the NNLS de-bias
VARIANTS = (("uniform", "uniform", {}), ("importance", "importance", {}), ("frank_wolfe", "frank_wolfe", {}),
            ("giga", "giga", {}), ("omp", "omp", {}), ("iht", "iht", {}), ("iht2", "iht2", {}),
            ("iht2_zero_start", "iht2", {"init": "zero"}), ("iht2_nnls", "iht2", {"debias": "nnls"}))
METHODS = tuple(label for label, _, _ in VARIANTS)
HERE = os.path.dirname(os.path.abspath(__file__))


def setup(n: int, j: int, seed: int = 0):
    """(model, data, Laplace pi_hat, V): the same projected vectors for every method."""
    key = jax.random.key(seed)
    k_data, k_pi, k_theta = jax.random.split(key, 3)
    ds = cj.data.synthetic_logistic(k_data, n)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train, key=k_pi)
    V = cj.project(model, ds.train, approx.sample(k_theta, j), norm="centered")
    return model, ds.train, approx, V.block_until_ready()


def projected(n: int, j: int, seed: int = 0):
    return setup(n, j, seed)[3]


def sparse_vi_rows(n: int, Ms, j: int) -> list:
    """Sparse VI with its defaults (IHT §5: step 1/t, 100 weight iterations; S = 100 samples of pi_w from a
    short NUTS chain, since logistic regression has no closed-form posterior), scored on the same V."""
    model, data, approx, V = setup(n, j)
    rows = []
    for M in Ms:
        t0 = time.perf_counter()
        cs = cj.coreset(model, data, M, "sparse_vi", key=jax.random.key(1), pi_hat=approx)
        cs.weights.block_until_ready()
        t = time.perf_counter() - t0
        err = float(cj.relative_error(V, cs, squared=True))
        rows.append(dict(N=n, M=M, method="sparse_vi", rel_sq_error=err, time_s=t, repeats=1,
                         num_points=cs.num_points, timing="one call, compilation included"))
        print(f"N={n:>6} M={M:>4} {'sparse_vi':>15}: err {err:.3e}  time {t:8.3f}s  points {cs.num_points}",
              flush=True)
    return rows


def timed(V, M, method, key, max_repeats=3, **options):
    t0 = time.perf_counter()
    cs = cj.build(V, M, method, key=key, compress=False, **options)
    cs.weights.block_until_ready()
    first = time.perf_counter() - t0
    repeats = max_repeats if first < 20 else 1
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        cs = cj.build(V, M, method, key=key, compress=False, **options)
        cs.weights.block_until_ready()
        times.append(time.perf_counter() - t0)
    return cs, statistics.median(times), first, repeats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="N = 10^4 and M <= 100 only")
    parser.add_argument("--fidelity", action="store_true",
                        help="only the fidelity table (cone, Fisher N = 1000, 5000; float64/float32 beside NumPy "
                             "twins) and the GIGA/FW speed-up at the reference setting: results/fidelity.*")
    parser.add_argument("--sparse-vi", action="store_true",
                        help="only add the sparse_vi section (N = 10^4, M in 10, 50, 100) to solvers.json")
    parser.add_argument("--fidelity-only", action="store_true",
                        help="with --fidelity: rerun the fidelity table only, keeping the speed rows (and their "
                             "reference-library setting) already in results/fidelity.json")
    parser.add_argument("--reference-library", default=None, metavar="PATH",
                        help="with --fidelity: a checkout of github.com/trevorcampbell/bayesian-coresets, timed "
                             "on the same V")
    args = parser.parse_args()
    if args.fidelity:
        fidelity_main(args.reference_library, args.fidelity_only)
        return
    if args.sparse_vi:
        path = os.path.join(HERE, "results", "solvers.json")
        with open(path) as f:
            out = json.load(f)
        out["sparse_vi"] = dict(config=dict(N=10_000, J=500, kernel="nuts", num_draws=100, num_iters=100,
                                            step="1/t", device=str(jax.devices()[0]), cpu_count=os.cpu_count()),
                                results=sparse_vi_rows(10_000, (10, 50, 100), 500))
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
        return
    Ns = (10_000,) if args.quick else (10_000, 100_000)
    Ms = (10, 50, 100) if args.quick else (10, 50, 100, 500, 1000)
    J = 500
    rows = []
    for n in Ns:
        V = projected(n, J)
        for M in Ms:
            for label, method, options in VARIANTS:
                cs, t, first, repeats = timed(V, M, method, jax.random.key(1), **options)
                err = float(cj.relative_error(V, cs, squared=True))
                row = dict(N=n, M=M, method=label, rel_sq_error=err, time_s=t, first_call_s=first,
                           repeats=repeats, num_points=cs.num_points, options=options)
                if "iterations" in cs.info:
                    row["iterations"] = int(cs.info["iterations"])
                if "greedy_start" in cs.info:
                    row["greedy_start_won"] = bool(cs.info["greedy_start"])
                rows.append(row)
                print(f"N={n:>6} M={M:>4} {label:>15}: err {err:.3e}  time {t:8.3f}s  points {cs.num_points}",
                      flush=True)
    out = dict(
        config=dict(model="logistic_regression", data="cj.data.synthetic_logistic (HC §7.2)", pi_hat="laplace",
                    norm="centered", J=J, N=list(Ns), M=list(Ms), compress=False,
                    timing="wall time of cj.build after a first (compiling) call; median of up to 3 repeats "
                           "(1 when the first call took over 20 s)",
                    sparse_vi="not in this table: it needs the model (cj.coreset) and draws samples of pi_w at "
                              "every step; see sparse_vi below if present",
                    jax=jax.__version__, device=str(jax.devices()[0]), cpu_count=os.cpu_count(),
                    platform=platform.platform()),
        results=rows,
    )
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    name = "solvers_quick" if args.quick else "solvers"  # a quick run never overwrites the full results
    path = os.path.join(HERE, "results", f"{name}.json")
    if os.path.exists(path):  # keep sections other runs added (e.g. sparse_vi)
        with open(path) as f:
            old = json.load(f)
        for k, v in old.items():
            out.setdefault(k, v)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    table(rows)
    plot(rows, Ns, os.path.join(HERE, "results", f"{name}.png"))


def fidelity_main(reference_library=None, fidelity_only=False):
    """benchmarks/fidelity.py's table and speed-up, written to results/fidelity.json and .png (with
    fidelity_only, the speed rows of the existing results/fidelity.json are kept)."""
    import fidelity

    jax.config.update("jax_enable_x64", True)  # float64 problems are built; float32 runs cast explicitly
    rows = fidelity.fidelity_rows()
    if fidelity_only:
        with open(os.path.join(HERE, "results", "fidelity.json")) as f:
            old = json.load(f)
        speed, reference_library = old["speed"], old["config"].get("reference_library")
    else:
        speed = fidelity.speed_rows(reference_library=reference_library)
    out = dict(config=dict(doc=fidelity.__doc__, jax=jax.__version__, device=str(jax.devices()[0]),
                           cpu_count=os.cpu_count(), platform=platform.platform(),
                           reference_library=reference_library,
                           note="shared 2-core CPU; times are medians of one run"
                                + ("; the speed rows are from the previous run (--fidelity-only)"
                                   if fidelity_only else "")),
               fidelity=rows, speed=speed)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "fidelity.json"), "w") as f:
        json.dump(out, f, indent=1)
    fidelity_plot(rows, speed, os.path.join(HERE, "results", "fidelity.png"))


def fidelity_plot(rows, speed, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = plt.subplots(1, len(problems) + 1, figsize=(5.5 * (len(problems) + 1), 5))
    for ax, prob in zip(axes, problems):
        rs = [r for r in rows if r["problem"] == prob]
        labels, vals, colors = [], [], []
        for r in rs:
            labels += [f"{r['solver']} f64", f"{r['solver']} f32"]
            vals += [r["error_float64"], r["error_float32"]]
            colors += ["C0", "C1"]
            for k, v in r["twins"].items():
                labels.append(k.replace(" (NumPy)", "").replace(" (numpy_reference)", "") + " [NumPy]")
                vals.append(v)
                colors.append("C2")
        ax.barh(range(len(vals)), [max(v, 1e-16) for v in vals], color=colors)
        ax.set_yticks(range(len(vals)), labels, fontsize=6)
        ax.set_xscale("log")
        ax.invert_yaxis()
        ax.set_title(f"{prob}: relative error", fontsize=9)
    ax = axes[-1]
    names = [s["method"] for s in speed]
    base = "speedup_over_reference_library" if "speedup_over_reference_library" in speed[0] else "speedup_over_numpy"
    for shift, (label, key) in zip((-0.2, 0.2), (("cj.build defaults", "jax_default"),
                                                 ("compress=False", "jax_exact"))):
        ax.bar(np.arange(len(names)) + shift, [s[base][key] for s in speed], 0.4, label=label)
    ax.axhline(20, color="k", ls="--", lw=0.8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(base.replace("_", " ") + " (median)")
    ax.set_title("N = 20000, J = 500, M = 500, float32", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(rows):
    print(f"\n{'N':>7} {'M':>5} | " + " | ".join(f"{m:>22}" for m in METHODS))
    print(f"{'':>7} {'':>5} | " + " | ".join(f"{'err / time s / pts':>22}" for _ in METHODS))
    keys = sorted({(r["N"], r["M"]) for r in rows})
    by = {(r["N"], r["M"], r["method"]): r for r in rows}
    for n, M in keys:
        cells = []
        for m in METHODS:
            r = by.get((n, M, m))
            cells.append(f"{r['rel_sq_error']:.1e} / {r['time_s']:6.3f} / {r['num_points']:>4}" if r else "")
        print(f"{n:>7} {M:>5} | " + " | ".join(f"{c:>22}" for c in cells))


def plot(rows, Ns, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(Ns), figsize=(6 * len(Ns), 8), squeeze=False)
    for col, n in enumerate(Ns):
        for m in METHODS:
            rs = sorted((r for r in rows if r["N"] == n and r["method"] == m), key=lambda r: r["M"])
            if not rs:
                continue
            Ms = [r["M"] for r in rs]
            axes[0, col].loglog(Ms, [max(r["rel_sq_error"], 1e-16) for r in rs], "o-", label=m)
            axes[1, col].loglog(Ms, [r["time_s"] for r in rs], "o-", label=m)
        axes[0, col].set_title(f"synthetic logistic, N = {n}, J = 500, centred")
        axes[0, col].set_ylabel("relative squared error")
        axes[1, col].set_ylabel("wall time after compilation (s)")
        for ax in axes[:, col]:
            ax.set_xlabel("M (coreset size / iterations)")
            ax.grid(True, which="both", alpha=0.3)
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
