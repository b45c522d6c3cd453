"""How well the one-pass certificate (`cj.certify`) predicts a coreset's true error (issue 22).

Part 1, closed form. The Gaussian mean model (HC §6, D = 20) and linear regression with known noise (D = 10,
heavy-tailed correlated covariates), N = 10^4: pi and pi_w are Gaussian (HC Eqs. 6.2 and 6.4; the conjugate
regression posterior), so KL(pi_w || pi) is exact, and the certificate is fed 2,000 i.i.d. draws of pi_w.
Methods uniform, importance, GIGA, A-IHT II and OMP on Fisher features at M = 10, 50, 200, 1000, 3 trials.

Part 2, MCMC. Logistic regression (phishing and ds1, 500 rows each; HC §7.2 synthetic, N = 20,000) and
Poisson regression (HC §7.2 synthetic, N = 20,000; biketrips_large; airportdelays_large). Each coreset is
sampled by NUTS (2 chains, 500 + 500), as a user would, and the certificate uses those draws; Coreset MCMC at
M = 100 uses its own draws (`draws=None`). Two full-data NUTS runs (2 x 1000 + 1000) give the reference:
  - moment KL(pi_w || pi) between Gaussians fitted to the coreset draws and to the full-data draws (the
    certificate's direction);
  - W1 / floor: W1 to full-data run a over W1 between runs a and b;
  - z: max over coordinates of |mean - full mean| / full sd, plain and corrected by the certificate (None
    where the certificate withholds its corrected mean: k-hat > 0.7 over spread ratios);
  - the draws' R-hat and bulk ESS as the certificate reports them (R-hat > 1.01 caps the verdict at usable).

Part 3, cost at N = 10^6 (HC §7.2 synthetic logistic): the certificate's pass (float64 and float32) against
the coreset's construction (Laplace, Fisher J = 500, GIGA M = 1000) and NUTS on the coreset, each compiled,
medians of alternating calls.

Writes benchmarks/results/certify.{json,png} (certify_quick with --quick):

    python benchmarks/certify.py            # the full run (about 40 min on the 2-core CPU)
    python benchmarks/certify.py --quick    # a smoke run (CI)
"""

from __future__ import annotations

import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402

VECTOR_METHODS = ("uniform", "importance", "giga", "iht2", "omp")
KHAT_FLAG = 0.7      # cj.certify's "unreliable"
W1_BAD = 3.0         # the "bad coreset": W1 more than 3x the full-data noise floor


def _gaussian_kl(m0, s0, m1, s1) -> float:
    inv = np.linalg.inv(s1)
    sign0, logdet0 = np.linalg.slogdet(s0)
    sign1, logdet1 = np.linalg.slogdet(s1)
    return 0.5 * float(np.trace(inv @ s0) + (m1 - m0) @ inv @ (m1 - m0) - m0.size + logdet1 - logdet0)


def _z(mean, ref_mean, ref_sd):
    """max |mean - ref_mean| / ref_sd; None where the certificate withholds its corrected mean (k-hat > 0.7)."""
    return None if mean is None else float(np.max(np.abs(np.asarray(mean) - ref_mean) / ref_sd))


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------
# Part 1: closed form.


def closed_form_problem(name: str, n: int):
    """(model, data) whose model has a closed-form weighted posterior (`model.posterior(data, weights)`)."""
    key = jax.random.key(11)
    if name.startswith("gaussian_D"):  # HC §6; the Fisher features have rank D + 1
        dim = int(name[len("gaussian_D"):])
        return cj.models.gaussian_mean(dim), cj.data.synthetic_gaussian(key, n, dim, mean=jnp.ones(dim))
    if name.startswith("linreg_D"):  # known noise, correlated heavy-tailed covariates: rank ~ D (D + 3) / 2
        dim = int(name[len("linreg_D"):])
        kx, ky, kt = jax.random.split(key, 3)
        X = jax.random.t(kx, 4.0, (n, dim)) @ (jnp.eye(dim) + 0.5)
        y = X @ jax.random.normal(kt, (dim,)) + jax.random.normal(ky, (n,))
        return cj.models.linear_regression(), (X, y)
    raise KeyError(name)


def closed_form(problems, n, sizes, trials, methods, log) -> list:
    rows = []
    for name in problems:
        model, data = closed_form_problem(name, n)
        with jax.enable_x64(True):  # the exact posteriors in float64: float32 rounding alone is KL ~ 1e-6
            data64 = jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), data)
            post = lambda w: tuple(np.asarray(a, np.float64) for a in model.posterior(  # noqa: E731
                data64, jnp.asarray(w, jnp.float64)))
            mean_f, cov_f = post(np.ones(n))
        sd_f = np.sqrt(np.diag(cov_f))
        for size in sizes:
            for trial in range(trials):
                for method in methods:
                    cs = _quiet(cj.coreset, model, data, size, method, key=jax.random.key(100 * trial + size))
                    with jax.enable_x64(True):
                        mean_w, cov_w = post(np.asarray(cs.dense(n), np.float64))
                    draws = np.random.default_rng(trial).multivariate_normal(mean_w, cov_w, size=2000)
                    cert = _quiet(cj.certify, model, data, cs, draws)
                    rows.append(dict(part="closed_form", problem=name, method=method, M=size,
                                     trial=trial, khat=cert.khat, kl_estimate=cert.kl, kl_se=cert.kl_se,
                                     ess=cert.ess, verdict=cert.verdict, points=int(cs.num_points),
                                     spread=cert.spread,
                                     true_kl=_gaussian_kl(mean_w, cov_w, mean_f, cov_f),
                                     z_plain=_z(draws.mean(0), mean_f, sd_f), z_corrected=_z(cert.mean, mean_f, sd_f),
                                     certify_s=cert.time_s))
                    log(rows[-1])
    return rows


# ----------------------------------------------------------------------------------------------------
# Part 2: MCMC problems.


def load(name: str, n: int):
    key = jax.random.key(7)
    if name == "synth_logistic":
        return cj.models.logistic_regression(), cj.data.synthetic_logistic(key, n).train
    if name == "synth_poisson":
        return cj.models.poisson_regression(), cj.data.synthetic_poisson(key, n).train
    path = common.data_path(name + ".npz")
    if path is None:
        return None
    ds = cj.load_npz(path)
    kind = cj.models.logistic_regression() if name in ("phishing", "ds1") else cj.models.poisson_regression()
    return kind, (ds.X, ds.y)


def mcmc_part(problems, n, sizes, trials, methods, samples, warmup, log, coreset_mcmc=True) -> tuple[list, list]:
    rows, refs = [], []
    for name in problems:
        loaded = load(name, n)
        if loaded is None:
            log({"skipped": name, "why": "data file not found"})
            continue
        model, data = loaded
        num = int(data[0].shape[0])
        nuts = lambda key, weights=None, s=samples, w=warmup: _quiet(  # noqa: E731
            cj.sample, model, data, key, weights=weights, num_samples=s, num_warmup=w, num_chains=2)
        start = time.perf_counter()
        full_a = np.asarray(nuts(jax.random.key(1), s=2 * samples, w=2 * warmup).samples, np.float64)
        full_s = time.perf_counter() - start
        full_b = np.asarray(nuts(jax.random.key(2), s=2 * samples, w=2 * warmup).samples, np.float64)
        a, b = full_a.reshape(-1, full_a.shape[-1]), full_b.reshape(-1, full_b.shape[-1])
        both = np.concatenate([a, b])
        mean_f, cov_f = both.mean(0), np.cov(both, rowvar=False)
        sd_f = np.sqrt(np.diag(cov_f))
        floor = float(cj.metrics.wasserstein1(a, b))
        refs.append(dict(problem=name, N=num, D=int(a.shape[1]), full_nuts_s=full_s, w1_floor=floor))
        log(refs[-1])
        for size in sizes:
            if size >= num:
                continue
            for trial in range(trials):
                extra = ("coreset_mcmc",) if coreset_mcmc and size == 100 and trial == 0 else ()
                for method in tuple(methods) + extra:
                    key = jax.random.key(1000 * trial + size)
                    start = time.perf_counter()
                    cs = _quiet(cj.coreset, model, data, size, method, key=key)
                    build_s = time.perf_counter() - start
                    start = time.perf_counter()
                    draws = cs.info["samples"] if method == "coreset_mcmc" else nuts(jax.random.fold_in(key, 1), cs).samples
                    draws = np.asarray(draws, np.float64)
                    sample_s = time.perf_counter() - start
                    row = dict(part="mcmc", problem=name, method=method, M=size, trial=trial, build_s=build_s,
                               sample_s=sample_s, points=int(cs.num_points))
                    try:
                        cert = _quiet(cj.certify, model, data, cs, None if method == "coreset_mcmc" else draws)
                    except ValueError as err:  # recorded: a certificate that refuses is a result too
                        row["certify_error"] = str(err)[:300]
                        rows.append(row), log(row)
                        continue
                    flat = draws.reshape(-1, draws.shape[-1])
                    mean_w, cov_w = flat.mean(0), np.cov(flat, rowvar=False)
                    try:
                        moment_kl = _gaussian_kl(mean_w, cov_w, mean_f, cov_f)
                    except np.linalg.LinAlgError:
                        moment_kl = None
                    row.update(khat=cert.khat, kl_estimate=cert.kl, kl_se=cert.kl_se, ess=cert.ess,
                               verdict=cert.verdict, spread=cert.spread, rhat=cert.rhat, ess_bulk=cert.ess_bulk,
                               certify_s=cert.time_s, moment_kl=moment_kl,
                               w1_floor=float(cj.metrics.normalized_wasserstein1(cj.metrics.wasserstein1(a, flat), floor)),
                               z_plain=_z(mean_w, mean_f, sd_f), z_corrected=_z(cert.mean, mean_f, sd_f))
                    rows.append(row)
                    log(row)
    return rows, refs


# ----------------------------------------------------------------------------------------------------
# Part 3: cost at large N.


def timing(n, size, samples, repeats, log) -> dict:
    model = cj.models.logistic_regression()
    data = cj.data.synthetic_logistic(jax.random.key(3), n).train
    key = jax.random.key(4)
    cs = _quiet(cj.coreset, model, data, size, "giga", key=key)
    post = _quiet(cj.sample, model, data, key, weights=cs, num_samples=samples, num_warmup=samples, num_chains=2)
    draws = np.asarray(post.samples)
    variants = {
        "construction_s": lambda: _quiet(cj.coreset, model, data, size, "giga", key=key).weights,
        "sampling_s": lambda: _quiet(cj.sample, model, data, key, weights=cs, num_samples=samples,
                                     num_warmup=samples, num_chains=2).samples,
        "certify_float64_s": lambda: _quiet(cj.certify, model, data, cs, draws).log_ratio,
        "certify_float32_s": lambda: _quiet(cj.certify, model, data, cs, draws, precision="float32").log_ratio,
    }
    times = common.alternate(variants, repeats)
    out = dict(N=n, M=size, method="giga", draws=int(draws.shape[0] * draws.shape[1]), **times,
               certify_over_construction=times["certify_float64_s"] / times["construction_s"],
               certify_over_sampling=times["certify_float64_s"] / times["sampling_s"])
    log(out)
    return out


# ----------------------------------------------------------------------------------------------------
# Summary and plot.


def _confusion(rows: list, flag) -> dict:
    """How a flag (a function of a row) sorts the coresets whose W1 / floor exceeds W1_BAD."""
    flagged = [bool(flag(r)) for r in rows]
    bad = [r["w1_floor"] > W1_BAD for r in rows]
    return {"coresets": len(rows),
            "bad_and_flagged": sum(f and b for f, b in zip(flagged, bad)),
            "bad_missed": sum(b and not f for f, b in zip(flagged, bad)),
            "good_but_flagged": sum(f and not b for f, b in zip(flagged, bad)),
            "good_and_passed": sum(not f and not b for f, b in zip(flagged, bad)),
            "missed": [f"{r['problem']} {r['method']} M={r['M']} (khat {r['khat']:.2f}, KL {r['kl_estimate']:.3g}, "
                       f"W1/floor {r['w1_floor']:.1f})" for r, f, b in zip(rows, flagged, bad) if b and not f],
            "false_alarms": [f"{r['problem']} {r['method']} M={r['M']} (khat {r['khat']:.2f}, KL "
                             f"{r['kl_estimate']:.3g}, W1/floor {r['w1_floor']:.2f})"
                             for r, f, b in zip(rows, flagged, bad) if f and not b]}


def summarise(rows: list) -> dict:
    from coresets_jax.certification.certificate import verdict

    out = {}
    mcmc = [r for r in rows if r["part"] == "mcmc" and "khat" in r]
    for r in rows:  # the verdict of the package as it is now (a ledger may predate a change of rule)
        if "khat" in r:
            r["verdict"] = verdict(r["khat"] if r["khat"] is not None else float("inf"), r["kl_estimate"],
                                   r.get("spread") if r.get("spread") is not None else float("inf"),
                                   r.get("rhat"))  # None: one chain, or a ledger from before issue 34
    out["khat_flags_w1_over_3"] = _confusion(mcmc, lambda r: r["khat"] is None or r["khat"] >= KHAT_FLAG)
    out["verdict_flags_w1_over_3"] = _confusion(mcmc, lambda r: r["verdict"] in ("unreliable", "poor"))
    out["verdicts"] = {v: sum(r.get("verdict") == v for r in rows) for v in ("good", "usable", "poor", "unreliable")}
    for part, truth in (("closed_form", "true_kl"), ("mcmc", "moment_kl")):
        sel = [r for r in rows if r["part"] == part and r.get(truth) is not None and "kl_estimate" in r]
        if len(sel) > 2:
            est, true = np.array([r["kl_estimate"] for r in sel]), np.array([r[truth] for r in sel])
            khat = np.array([np.inf if r["khat"] is None else r["khat"] for r in sel])
            rank = lambda v: np.argsort(np.argsort(v))  # noqa: E731
            ratio = est / np.maximum(true, 1e-300)
            near = (ratio > 0.5) & (ratio < 2)
            out[f"kl_{part}"] = {"rows": len(sel), "spearman": float(np.corrcoef(rank(est), rank(true))[0, 1]),
                                 "median_estimate_over_truth": float(np.median(ratio)),
                                 "estimate_within_2x_of_truth": int(np.sum(near)),
                                 "rows_with_khat_below_0.7": int(np.sum(khat < KHAT_FLAG)),
                                 "estimate_within_2x_where_khat_below_0.7": int(np.sum(near & (khat < KHAT_FLAG)))}
        # Rows whose certificate withholds the corrected mean (k-hat > 0.7 over spread ratios) have no z_corrected.
        zs = [r for r in rows if r["part"] == part and r.get("z_corrected") is not None]
        if zs:
            usable = [r for r in zs if r["khat"] is not None and r["khat"] < KHAT_FLAG]
            out[f"correction_{part}"] = {
                "rows": len(zs), "corrected_withheld": sum(r["part"] == part and "z_plain" in r
                                                           and r.get("z_corrected") is None for r in rows),
                "corrected_closer": sum(r["z_corrected"] < r["z_plain"] for r in zs),
                "rows_khat_below_0.7": len(usable),
                "corrected_closer_where_khat_below_0.7": sum(r["z_corrected"] < r["z_plain"] for r in usable),
                "median_z_plain": float(np.median([r["z_plain"] for r in zs])),
                "median_z_corrected": float(np.median([r["z_corrected"] for r in zs])),
                "median_z_plain_khat_below_0.7": float(np.median([r["z_plain"] for r in usable])) if usable else None,
                "median_z_corrected_khat_below_0.7": (float(np.median([r["z_corrected"] for r in usable]))
                                                      if usable else None)}
    return out


def plot(result: dict, out_dir: str, stem: str) -> None:
    rows = result["rows"]
    fig, axes = common.figure(1, 4, size=(4.2, 3.8))
    methods = sorted({r["method"] for r in rows})
    colour = {m: f"C{i}" for i, m in enumerate(methods)}
    panels = [("closed_form", "true_kl", "kl_estimate", "exact KL(pi_w || pi)", "certificate's KL estimate"),
              ("mcmc", "moment_kl", "kl_estimate", "moment KL(pi_w || pi), full NUTS", "certificate's KL estimate"),
              ("mcmc", "w1_floor", "khat", "W1 / noise floor", "k-hat"),
              (None, "z_plain", "z_corrected", "max |z| of the mean, plain", "max |z|, corrected")]
    for ax, (part, xk, yk, xl, yl) in zip(axes[0], panels):
        for m in methods:
            pts = [(r[xk], r[yk]) for r in rows if r["method"] == m and (part is None or r["part"] == part)
                   and r.get(xk) is not None and r.get(yk) is not None and r[xk] > 0]
            if pts:
                xs, ys = zip(*pts)
                ax.scatter(xs, ys, s=9, color=colour[m], label=m, alpha=0.7)
        ax.set_xscale("log")
        if yk != "khat":
            ax.set_yscale("log")
            lo, hi = ax.get_xlim()
            ax.plot([lo, hi], [lo, hi], "k:", lw=0.8)
        else:
            ax.axhline(KHAT_FLAG, color="k", lw=0.8, ls=":")
            ax.axvline(W1_BAD, color="k", lw=0.8, ls=":")
            ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xlabel(xl, fontsize=8), ax.set_ylabel(yl, fontsize=8)
    axes[0][0].legend(fontsize=6)
    fig.suptitle(f"cj.certify against the truth; {result['environment']['device']}", fontsize=9)
    common.save_figure(fig, out_dir, stem)


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+",
                       default=["phishing", "ds1", "synth_logistic", "synth_poisson", "biketrips_large",
                                "airportdelays_large"])
        p.add_argument("--n", type=int, default=20_000, help="rows of the synthetic MCMC problems")
        p.add_argument("--timing-n", type=int, default=1_000_000)
        p.add_argument("--skip", nargs="*", default=[], choices=["closed_form", "mcmc", "timing"])
        p.add_argument("--report", action="store_true", help="re-summarise and re-plot the existing JSON")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    stem = common.stem("certify", args.quick)
    if args.report:
        import json
        with open(os.path.join(args.out, stem + ".json")) as f:
            result = json.load(f)
        result["summary"] = summarise(result["rows"])
        common.write_json(result, args.out, stem)
        plot(result, args.out, stem)
        return result
    lines = []

    def log(row):
        text = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
        print(text, flush=True)
        lines.append(row)

    if args.quick:
        settings = dict(closed=("gaussian_D2",), n=2000, sizes=(10, 100), trials=1, problems=["synth_logistic"], mcmc_n=1000,
                        mcmc_sizes=(20, 100), mcmc_trials=1, samples=100, warmup=100, timing_n=5000,
                        timing_repeats=1, methods=("uniform", "giga"))
    else:
        settings = dict(closed=("gaussian_D20", "linreg_D10"), n=10_000, sizes=(10, 50, 200, 1000), trials=args.trials or 3,
                        problems=args.problems, mcmc_n=args.n, mcmc_sizes=(20, 100, 500),
                        mcmc_trials=args.trials or 2, samples=500, warmup=500, timing_n=args.timing_n,
                        timing_repeats=3, methods=VECTOR_METHODS)
    start = time.perf_counter()
    rows, refs, cost = [], [], None
    if "closed_form" not in args.skip:
        rows += closed_form(settings["closed"], settings["n"], settings["sizes"], settings["trials"],
                            settings["methods"], log)
    if "mcmc" not in args.skip:
        more, refs = mcmc_part(settings["problems"], settings["mcmc_n"], settings["mcmc_sizes"],
                               settings["mcmc_trials"], settings["methods"], settings["samples"],
                               settings["warmup"], log, coreset_mcmc=not args.quick)
        rows += more
    if "timing" not in args.skip:
        cost = timing(settings["timing_n"], 1000 if not args.quick else 100, settings["samples"],
                      settings["timing_repeats"], log)
    result = {"quick": bool(args.quick), "environment": common.environment(), "settings": {k: list(v) if isinstance(v, tuple) else v
                                                                  for k, v in settings.items()},
              "summary": summarise(rows), "references": refs, "timing": cost, "rows": rows,
              "wall_s": time.perf_counter() - start,
              "reductions": {"closed_form_trials": settings["trials"], "mcmc_trials": settings["mcmc_trials"],
                             "note": "NUTS 2 x (500 + 500) per coreset and 2 x (1000 + 1000) per full-data run; "
                                     "the papers have no certificate to reproduce"}}
    common.write_json(result, args.out, stem)
    plot(result, args.out, stem)
    return result


if __name__ == "__main__":
    main()
