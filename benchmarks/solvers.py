"""Every construction on the same projected vectors (issue 3), and the solvers' fidelity (issue 11).

Default: synthetic logistic regression (HC §7.2: x ~ N(0, I_2), theta = [3, 3, 0]), Laplace pi_hat, J = 500
centred L2 features (IHT §2: each row's mean over the samples removed, so the constant offset the plain L2
norm penalises is gone; the Fisher norm would do too, but the IHT objective is stated for centred features).
For N in {10^4, 10^5} and M in {10, 50, 100, 500, 1000} it records the relative squared error
||sum v - V^T w||^2 / ||sum v||^2, the wall time after compilation (median of repeats) and the number of
selected points. Solvers run on the full V (compress=False), so the times are those of the solvers.

--fidelity: each solver's relative error ||y - V^T w|| / ||y|| in float64 and float32, beside an independent
plain NumPy/SciPy implementation (benchmarks/numpy_reference.py, float64):
  plain NumPy/SciPy implementation written here from the papers (float64):
    - A-IHT II, IHT Algorithm 3 (appendix A) with the exact line-search steps as printed, and as the authors'
      published NumPy code runs it: each of the two line-search steps (lines 6 and 9) is half the exact one (its
      factor 1/2 multiplies Phi^T r, not the gradient 2 Phi^T r), the de-bias gradient covers the k slots of x_t,
      and the last iterate is returned (written here from that description, not copied);
    - orthogonal pursuit with SciPy's exact NNLS on the support and re-selection of rows whose weight fell to 0;
    - GIGA (Campbell & Broderick 2018, Algorithm 1) and Frank-Wolfe (HC Algorithm 2): benchmarks/numpy_reference.py.
  Problems:
    - "cone": the IHT authors' example, uniform(-1/2, 1/2) vectors (N = 1000, J = 300), target in the cone of
      K = 100 of them with uniform(0, 1) weights (numpy seed 233); the target is not sum_n v_n, so only the
      sparse regression solvers (A-IHT II, OMP) apply;
    - "fisher": Fisher features (HC Eq. 5.7) of synthetic logistic regression (HC §7.2), Laplace pi_hat,
      target sum_n v_n: N = 1000 (J = 100, M = 30) and N = 5000 (J = 200, M = 100);
    - "opposite pairs" (issue 24): the K = 100 rows that define the target, P = 450 random rows a_p each beside
      -a_p, and one offset row that puts sum_n v_n in the cone of the K rows (J = 300, N = 1001, uniform(-1/2,
      1/2), numpy seed 233, drawn as one (J, K + P) matrix, then the weights); the target is sum_n v_n, so every
      solver applies. The previous A-IHT II default (swap=False) stalled there at 1.1e-2.
  OMP's float32 round-off floor: sqrt(J) eps32 sum_S w_n ||v_n|| / ||y|| of its float32 solution.
  Speed: GIGA and Frank-Wolfe at the reference library's own setting (centred L2 features of synthetic logistic
  regression, N = 20000, J = 500, M = 500, float32 V), cj.build at its defaults (compress="auto") and with
  compress=False, against the plain NumPy implementation on the same V and, with --reference-library PATH (a
  checkout of github.com/trevorcampbell/bayesian-coresets, which is run, not copied), against the reference
  library's own `snnls.GIGA` / `snnls.FrankWolfe` on the same V in float64 (its own dtype; it is slower in
  float32). Alternating, medians, in one run.

    python benchmarks/solvers.py [--quick]
    python benchmarks/solvers.py --sparse-vi   # adds Sparse VI at N = 10^4, M <= 100 to solvers.json (minutes)
    python benchmarks/solvers.py --fidelity [--reference-library PATH] [--fidelity-only] [--quick]

writes results/solvers.{json,png} or, with --fidelity, results/fidelity.{json,png} (*_quick.* with --quick)
and prints a table.
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]  # this checkout's coresets_jax, then common
import common  # noqa: E402
import numpy_reference as npref  # noqa: E402

import coresets_jax as cj  # noqa: E402
from coresets_jax.solvers import make_problem, run  # noqa: E402
from coresets_jax.solvers.frank_wolfe import frank_wolfe  # noqa: E402
from coresets_jax.solvers.giga import giga  # noqa: E402
from coresets_jax.solvers.iht import iht2  # noqa: E402
from coresets_jax.solvers.omp import omp  # noqa: E402

# (label, method, options): A-IHT II also from the zero start alone (Algorithm 3 as printed), to show what
# the default's second (GIGA) start buys and costs, and with the NNLS de-bias
VARIANTS = (("uniform", "uniform", {}), ("importance", "importance", {}), ("frank_wolfe", "frank_wolfe", {}),
            ("giga", "giga", {}), ("omp", "omp", {}), ("iht", "iht", {}), ("iht2", "iht2", {}),
            ("iht2_zero_start", "iht2", {"init": "zero"}), ("iht2_nnls", "iht2", {"debias": "nnls"}))
METHODS = tuple(label for label, _, _ in VARIANTS)


def setup(n: int, j: int, seed: int = 0) -> common.LogisticProblem:
    """The same centred vectors for every method."""
    k_data, k_pi, k_theta = jax.random.split(jax.random.key(seed), 3)
    return common.logistic_problem(n, j, "centered", data_key=k_data, pihat_key=k_pi, theta_key=k_theta)


def projected(n: int, j: int, seed: int = 0):
    return setup(n, j, seed).V


def sparse_vi_rows(n: int, Ms, j: int) -> list:
    """Sparse VI with its defaults (IHT §5: step 1/t, 100 weight iterations; S = 100 samples of pi_w from a
    short NUTS chain, since logistic regression has no closed-form posterior), scored on the same V."""
    p = setup(n, j)
    rows = []
    for M in Ms:
        t = common.time_fn(lambda: cj.coreset(p.model, p.train, M, "sparse_vi", key=jax.random.key(1),
                                              pi_hat=p.pi_hat), repeats=0)
        cs = t["output"]
        err = float(cj.relative_error(p.V, cs, squared=True))
        rows.append(dict(N=n, M=M, method="sparse_vi", rel_sq_error=err, time_s=t["compile_s"], repeats=1,
                         num_points=cs.num_points, timing="one call, compilation included"))
        print(f"N={n:>6} M={M:>4} {'sparse_vi':>15}: err {err:.3e}  time {t['compile_s']:8.3f}s  "
              f"points {cs.num_points}", flush=True)
    return rows


def _extra(p):
    p.add_argument("--fidelity", action="store_true",
                   help="only the fidelity table (cone, Fisher N = 1000, 5000; float64/float32 beside NumPy "
                        "twins) and the GIGA/FW speed-up at the reference setting: results/fidelity.*")
    p.add_argument("--sparse-vi", action="store_true",
                   help="only add the sparse_vi section (N = 10^4, M in 10, 50, 100) to solvers.json")
    p.add_argument("--fidelity-only", action="store_true",
                   help="with --fidelity: rerun the fidelity table only, keeping the speed rows (and their "
                        "reference-library setting) already in results/fidelity.json")
    p.add_argument("--reference-library", default=None, metavar="PATH",
                   help="with --fidelity: a checkout of github.com/trevorcampbell/bayesian-coresets, timed "
                        "on the same V")


def _merge_existing(out: dict, out_dir: str, stem: str) -> dict:
    """Keep sections that other runs added to the same file (e.g. sparse_vi)."""
    path = os.path.join(out_dir, f"{stem}.json")
    if os.path.exists(path):
        with open(path) as f:
            for k, v in json.load(f).items():
                out.setdefault(k, v)
    return out


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    if args.fidelity:
        return fidelity_main(args)
    if args.sparse_vi:
        stem = common.stem("solvers", args.quick)
        with open(os.path.join(args.out, f"{stem}.json")) as f:
            out = json.load(f)
        out["sparse_vi"] = dict(config=dict(N=10_000, J=500, kernel="nuts", num_draws=100, num_iters=100,
                                            step="1/t"), environment=common.environment(),
                                results=sparse_vi_rows(10_000, (10, 50, 100), 500))
        common.write_json(out, args.out, stem)
        return out
    Ns = (10_000,) if args.quick else (10_000, 100_000)
    Ms = (10, 50, 100) if args.quick else (10, 50, 100, 500, 1000)
    J = 500
    rows = []
    for n in Ns:
        V = projected(n, J)
        for M in Ms:
            for label, method, options in VARIANTS:
                t = common.time_fn(lambda: cj.build(V, M, method, key=jax.random.key(1), compress=False,
                                                    **options), repeats=3, slow_s=20.0)
                cs = t["output"]
                err = float(cj.relative_error(V, cs, squared=True))
                row = dict(N=n, M=M, method=label, rel_sq_error=err, time_s=t["median_s"],
                           first_call_s=t["compile_s"], repeats=len(t["runs_s"]), num_points=cs.num_points,
                           options=options)
                if "iterations" in cs.info:
                    row["iterations"] = int(cs.info["iterations"])
                if "greedy_start" in cs.info:
                    row["greedy_start_won"] = bool(cs.info["greedy_start"])
                rows.append(row)
                print(f"N={n:>6} M={M:>4} {label:>15}: err {err:.3e}  time {t['median_s']:8.3f}s  "
                      f"points {cs.num_points}", flush=True)
    out = dict(
        quick=bool(args.quick), environment=common.environment(),
        config=dict(model="logistic_regression", data="cj.data.synthetic_logistic (HC §7.2)", pi_hat="laplace",
                    norm="centered", J=J, N=list(Ns), M=list(Ms), compress=False,
                    timing="wall time of cj.build after a first (compiling) call; median of up to 3 repeats "
                           "(1 when the first call took over 20 s)",
                    sparse_vi="not in this table: it needs the model (cj.coreset) and draws samples of pi_w at "
                              "every step; see sparse_vi below if present"),
        results=rows,
    )
    stem = common.stem("solvers", args.quick)  # a quick run never overwrites the full results
    out = _merge_existing(out, args.out, stem)
    common.write_json(out, args.out, stem)
    table(rows)
    plot(rows, Ns, args.out, stem)
    return out


# ------------------------------------------------------------------------------------------------------
# --fidelity (issue 11): problems, our solvers on them beside the NumPy twins, and the reference-setting speed.


def cone(support_first=True):
    """The authors' example (their draw order: the support, then the weights); support_first=False draws the
    weights first (another instance of the same construction, on which every A-IHT II variant stalls)."""
    rng = np.random.RandomState(233)
    A = rng.rand(300, 1000) - 0.5
    w = np.zeros(1000)
    if support_first:
        support = rng.permutation(1000)[:100]
        w[support] = rng.rand(100)
    else:
        values = rng.rand(100)
        w[rng.permutation(1000)[:100]] = values
    return A.T.copy(), A @ w, 100


def opposite_pairs(seed=233, j=300, k=100, p=450):
    """Issue 24's example (module docstring); returns (V, sum_n v_n, K)."""
    rng = np.random.RandomState(seed)
    A = rng.rand(j, k + p) - 0.5
    w = rng.rand(k)
    rows, pairs = A[:, :k].T, A[:, k:].T
    V = np.concatenate([rows, np.stack([pairs, -pairs], axis=1).reshape(2 * p, j), ((w - 1.0) @ rows)[None]])
    return V, V.sum(0), k


def fisher(n, j, seed=0):
    """Fisher features in float64 (projected with x64 on; the data and the Laplace fit as in float32)."""
    kd, kp, kt, kf = jax.random.split(jax.random.key(seed), 4)
    ds = cj.data.synthetic_logistic(kd, n)
    model = cj.models.logistic_regression()
    approx = cj.laplace(model, ds.train, key=kp)
    with jax.enable_x64(True):
        V = cj.project(model, ds.train, approx.sample(kt, j), norm="fisher", key=kf, dtype=jnp.float64)
        V = np.asarray(V, np.float64)
    return V, V.sum(0)


def rel_error(V, y, w):
    return float(np.linalg.norm(y - w @ V) / np.linalg.norm(y))


def ours(solver, V, y, dtype):
    """(dense weights in float64, seconds after compilation, iterations or None) of a solver run on target y."""
    problem = make_problem(jnp.asarray(V, dtype))._replace(target=jnp.asarray(y, dtype))
    fn = jax.jit(lambda p: run(solver, p, jax.random.key(0)))
    t = common.time_fn(fn, problem, repeats=1)
    idx, w, info = t["output"]
    t = t["median_s"]
    dense = np.zeros(V.shape[0])
    np.add.at(dense, np.asarray(idx), np.asarray(w, np.float64))
    return dense, t, (int(info["iterations"]) if "iterations" in info else None)


def fidelity_rows(quick=False):
    problems = [("cone", *cone()), ("fisher N=1000", *fisher(1000, 100), 30)]
    if not quick:
        problems = [problems[0], ("cone, weights drawn first", *cone(False)), problems[1],
                    ("fisher N=5000", *fisher(5000, 200), 100), ("opposite pairs", *opposite_pairs())]
    rows = []
    for name, V, y, M in problems:
        sparse_only = name.startswith("cone")
        printed = ("A-IHT II as printed (NumPy)", lambda: npref.aiht2_algorithm3(V, y, M))
        authors = ("A-IHT II as the authors' code runs it (NumPy)", lambda: npref.aiht2_algorithm3(V, y, M, authors=True))
        ortho = ("orthogonal pursuit + SciPy NNLS (NumPy)", lambda: (npref.omp_nnls(V, y, M), None))
        variants = [("iht2 (default)", lambda: iht2(M), [printed, authors]),
                    ("iht2 swap=False (the previous default)", lambda: iht2(M, swap=False), []),
                    ("iht2 debias='step'", lambda: iht2(M, debias="step"), []),
                    ("omp (default)", lambda: omp(M), [ortho]),
                    ("omp exact_nnls=False (the previous default)", lambda: omp(M, exact_nnls=False), [])]
        if not sparse_only:
            variants += [("giga", lambda: giga(M), [("GIGA (numpy_reference)", lambda: (npref.giga(V, M), None))]),
                         ("frank_wolfe", lambda: frank_wolfe(M),
                          [("Frank-Wolfe (numpy_reference)", lambda: (npref.frank_wolfe(V, M), None))])]
        for label, make, twins in variants:
            row = dict(problem=name, N=V.shape[0], J=V.shape[1], M=M, solver=label)
            with jax.enable_x64(True):
                w64, t64, it64 = ours(make(), V, y, jnp.float64)
            w32, t32, it32 = ours(make(), V, y, jnp.float32)
            row.update(error_float64=rel_error(V, y, w64), error_float32=rel_error(V, y, w32),
                       time_float64_s=t64, time_float32_s=t32, points=int(np.sum(w64 > 0)), twins={},
                       float32_roundoff_floor=float(np.sqrt(V.shape[1]) * np.finfo(np.float32).eps * np.sum(
                           np.abs(w32) * np.linalg.norm(V, axis=1)) / np.linalg.norm(y)))
            if it64 is not None:
                row.update(iterations_float64=it64, iterations_float32=it32, twin_iterations={})
            for twin_label, twin in twins:
                w_twin, its = twin()
                row["twins"][twin_label] = rel_error(V, y, w_twin)
                if its is not None:
                    row["twin_iterations"][twin_label] = its
            rows.append(row)
            print(f"{name:>14} {label:>22}: f64 {row['error_float64']:.2e}  f32 {row['error_float32']:.2e}  "
                  + (f"its {it64}/{it32}  " if it64 is not None else "")
                  + "  ".join(f"[{k}: {v:.2e}]" for k, v in row["twins"].items()), flush=True)
    return rows


def _reference_library(path):
    """The reference library's SNNLS classes, imported from a checkout at `path` (None: not measured)."""
    if path is None:
        return None
    import logging
    import sys

    sys.path.insert(0, path)
    import bayesiancoresets as bc

    logging.disable(logging.WARNING)  # it logs every numerical-precision retry
    return {"giga": bc.snnls.GIGA, "frank_wolfe": bc.snnls.FrankWolfe}


def speed_rows(n=20_000, j=500, m=500, repeats=3, reference_library=None):
    """GIGA and FW: cj.build (defaults, and compress=False) against numpy_reference on the same float32 V and,
    if given, the reference library on the same V in float64; alternating; medians."""
    V = projected(n, j)
    Vn = np.asarray(V)
    V64 = Vn.astype(np.float64)
    y = V64.sum(0)
    ref = _reference_library(reference_library)
    out = []
    for method, npfn in (("giga", npref.giga), ("frank_wolfe", npref.frank_wolfe)):
        variants = {"jax_default": {}, "jax_exact": dict(compress=False)}
        calls = {label: (lambda opts=opts: cj.build(V, m, method, **opts)) for label, opts in variants.items()}
        calls["numpy"] = lambda: npfn(Vn, m)
        if ref:
            A = V64.T.copy()

            def reference(A=A, method=method):
                alg = ref[method](A, A.sum(1))
                alg.build(m)
                return alg.weights()
            calls["reference_library"] = reference
        med = common.alternate(calls, repeats)  # each variant warmed up (compiled) once, then alternated
        outputs = {label: call() for label, call in calls.items()}
        compressed = {label: bool(outputs[label].settings["compressed"]) for label in variants}
        errors = {label: rel_error(V64, y, np.asarray(outputs[label].dense(n) if label in variants
                                                      else outputs[label], np.float64)) for label in calls}
        row = dict(method=method, N=n, J=j, M=m, dtype="float32", median_s=med, errors=errors,
                   default_compressed=compressed["jax_default"], repeats=repeats,
                   speedup_over_numpy={k: med["numpy"] / med[k] for k in variants})
        if ref:
            row["speedup_over_reference_library"] = {k: med["reference_library"] / med[k] for k in variants}
            row["error_ratio_to_reference_library"] = {k: errors[k] / errors["reference_library"]
                                                       for k in variants}
        out.append(row)
        print(f"{method}: " + "  ".join(f"{k} {v:.3f}s (err {errors[k]:.4f})" for k, v in med.items()), flush=True)
    return out


def fidelity_main(args) -> dict:
    """results/fidelity.{json,png} (with --fidelity-only, the speed rows of the existing file are kept).
    Quick: the cone and Fisher N = 1000 problems only, and the speed rows at N = 2000, M = 50."""
    jax.config.update("jax_enable_x64", True)  # float64 problems are built; float32 runs cast explicitly
    try:
        rows = fidelity_rows(quick=args.quick)
        stem = common.stem("fidelity", args.quick)
        reference_library = args.reference_library
        if args.fidelity_only:
            with open(os.path.join(args.out, f"{stem}.json")) as f:
                old = json.load(f)
            speed, reference_library = old["speed"], old["config"].get("reference_library")
        else:
            speed = (speed_rows(n=2000, m=50, repeats=1, reference_library=reference_library) if args.quick
                     else speed_rows(reference_library=reference_library))
    finally:
        jax.config.update("jax_enable_x64", False)
    out = dict(quick=bool(args.quick), environment=common.environment(),
               config=dict(doc=__doc__, reference_library=reference_library,
                           note="shared 2-core CPU; times are medians of one run"
                                + ("; the speed rows are from the previous run (--fidelity-only)"
                                   if args.fidelity_only else "")),
               fidelity=rows, speed=speed)
    common.write_json(out, args.out, stem)
    fidelity_plot(rows, speed, args.out, stem)
    return out


def fidelity_plot(rows, speed, out_dir, stem):
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    fig, axes = common.figure(1, len(problems) + 1, (5.5, 5.0))
    axes = axes[0]
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
    ax.set_title(f"N = {speed[0]['N']}, J = {speed[0]['J']}, M = {speed[0]['M']}, float32", fontsize=9)
    ax.legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


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


def plot(rows, Ns, out_dir, stem):
    fig, axes = common.figure(2, len(Ns), (6.0, 4.0))
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
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
