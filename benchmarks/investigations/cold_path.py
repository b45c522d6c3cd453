"""The cold construction path at scale, stage by stage, and two cheaper options for it (issue 36, part 2).

Part 1, `--profile` (default): logistic regression, D = 10, the NumPyro model and data of benchmarks/vs_peers.py
(`cj.from_numpyro`), N in {5e5, 1e6}, M = 100 (vs_peers' 10 D). In a FRESH process with empty caches
(JAX_COMPILATION_CACHE_DIR a new folder, CORESETS_JAX_NO_CACHE=1), the stages of the fixed-size route run one
after another, each timed (wall, blocked until ready) with the XLA compilations inside it (JAX's compile log:
count and seconds); then every stage runs a second time in the same process (compiled: its run time):

  laplace   cj.laplace(model, data, key) on all rows (or, variant `sub`, on a subsample: `subsample=n`)
  project   approx.sample(key, J) and cj.project(model, data, thetas, "fisher", key) (J = 500, or `auto`)
  omp       cj.build(V, M, "omp", key)
  sample    cj.sample(model, data, key, weights=cs): NUTS, 2 chains x (400 + 400)
  certify   cj.certify(model, data, cs, post.samples)

Variants (one fresh process each, alternating within a repeat): `default` (full Laplace, J = 500), `sub`
(Laplace on n = 10,000 rows, log-likelihood scaled by N / n: `cj.laplace(..., subsample=n)`, an existing
option), `subinit` (Newton on all rows started at the mode of the fit on 10,000 rows: the same pi_hat as
`default`, fewer full-data iterations), `auto` (J = max(32, 8 D), the rule `cj.features.projection.auto_num_features` had then,
80 here), `sub+auto`; in the
quality part also `sub1000` (n = 1,000) and `J160`.

Part 2, `--quality`: the variants' coreset quality against full-data NUTS, as benchmarks/models.py measures it
(z2 = mean_d (mu_hat_d - mu_d)^2 / sd_d^2 of the coreset posterior mean, W1 / floor, and the certificate's KL),
on: vs_peers' logistic and Poisson D = 10 at N = 1e5 (N / n = 10 and, with `sub1000`, 100: the pi_hat mean
is off by about sqrt(N / n) posterior sd, as with n = 10,000 at N = 1e6) (built-in models on the same rows:
the same posterior, closed-form gradients), and the real biketrips_large (Poisson, N = 15,641, D = 9; its
full-data reference is models.py's). Construction through `cj.coreset(..., method="omp", pi_hat=...,
num_features=...)` with M = 300; coreset posterior: NUTS 2 x (500 + 1000). Trials: keys 0..T-1.

    python benchmarks/investigations/cold_path.py --profile [--sizes 500000 1000000] [--repeats 1]
    python benchmarks/investigations/cold_path.py --quality [--trials 2]
    python benchmarks/investigations/cold_path.py --certify       # compiled certify options at N = 5e5
Writes results/cold_path.json and .png (the profile; --append earlier files for more repeats),
results/cold_path_quality.json and .png, results/cold_path_certify.json.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path[:0] = [BENCH, os.path.dirname(BENCH)]
import common  # noqa: E402

D, J = 10, 500
M = 100  # the profile's coreset size: vs_peers' ours_fixed (10 D)
QUALITY_M = 300  # the quality part's (3x more points than the auto J keeps: a harder test of J = 8 D)
SUBSAMPLE = 10_000
VARIANTS = ("default", "sub", "subinit", "auto", "sub+auto")
QUALITY_VARIANTS = ("default", "sub1000", "sub", "auto", "J160", "sub+auto")
STAGES = ("laplace", "project", "omp", "sample", "certify")
TMP = os.path.join(common.RESULTS, "tmp")


def variant_settings(variant: str, n: int, d: int, m: int) -> dict:
    """A variant's Laplace rows and J from its '+'-joined tokens: 'default'; 'sub' (SUBSAMPLE rows) or 'sub<n>';
    'subinit' (the full-data Newton fit started at the mode of a fit on SUBSAMPLE rows: the default's pi_hat
    with fewer full passes); 'auto' (J = max(32, 8 D)) or 'J<j>'."""
    import coresets_jax as cj

    subsample, num_features, start = None, J, None
    for token in variant.split("+"):
        if token == "subinit":
            start = SUBSAMPLE
        elif token == "sub":
            subsample = SUBSAMPLE
        elif token.startswith("sub"):
            subsample = int(token[3:])
        elif token == "auto":
            num_features = max(32, 8 * d)  # the rule auto_num_features had when this ran
        elif token.startswith("J"):
            num_features = int(token[1:])
        elif token != "default":
            raise ValueError(f"variant: unknown token {token!r} in {variant!r}")
    return {"subsample": None if subsample is None or subsample >= n else subsample, "num_features": num_features,
            "start_subsample": None if start is None or start >= n else start}


# ----------------------------------------------------------------------------------------------------
# Part 1: the profile, in a fresh process.


def child_main(argv=None) -> None:
    import logging
    import warnings

    t_start = time.perf_counter()
    cfg = json.loads((argv or sys.argv[1:])[0])
    import jax
    import numpyro  # noqa: F401
    import coresets_jax as cj
    import vs_peers
    from cold_start import LOG
    scope: dict = {}
    exec(LOG + vs_peers.MODEL_CODE, scope)
    out = {"import_s": time.perf_counter() - t_start}
    warnings.simplefilter("ignore")
    X, y, _ = vs_peers.make_data("logistic", cfg["D"], cfg["N"])
    X, y = jax.device_put(X), jax.device_put(y)
    model, data = cj.from_numpyro(scope["logistic"], X, y)
    jax.block_until_ready(data)
    settings = variant_settings(cfg["variant"], cfg["N"], cfg["D"], cfg["M"])
    out["settings"] = settings
    key = jax.random.key(0)
    k_pi, k_theta, k_proj, k_solve, k_sample = jax.random.split(key, 5)
    state = {}

    def laplace():
        init = None
        if settings.get("start_subsample"):  # Newton on all rows, started at a subsample's mode
            init = cj.laplace(model, data, key=k_pi, subsample=settings["start_subsample"]).mean
        state["approx"] = cj.laplace(model, data, key=k_pi, subsample=settings["subsample"], init=init)
        return state["approx"].mean

    def project():
        thetas = state["approx"].sample(k_theta, settings["num_features"])
        state["V"] = cj.project(model, data, thetas, norm="fisher", key=k_proj)
        return state["V"]

    def omp():
        state["cs"] = cj.build(state["V"], cfg["M"], "omp", key=k_solve)
        return state["cs"].weights

    def sample():
        state["post"] = cj.sample(model, data, k_sample, weights=state["cs"], num_samples=400, num_warmup=400,
                                  num_chains=2, warn=False)
        return state["post"].samples

    def certify():
        state["cert"] = cj.certify(model, data, state["cs"], state["post"].samples)
        return state["cert"].kl

    stages = {"laplace": laplace, "project": project, "omp": omp, "sample": sample, "certify": certify}
    out["stages"] = {name: {} for name in stages}
    for rnd in ("first", "second"):
        for name, fn in stages.items():
            scope["start_log"]()
            logging.getLogger("jax._src.interpreters.pxla").disabled = True
            t = time.perf_counter()
            jax.block_until_ready(fn())
            seconds = time.perf_counter() - t
            log = scope["compile_log"]()
            out["stages"][name][rnd + "_s"] = seconds
            out["stages"][name][rnd + "_compile_s"] = log["compile_s"]
            out["stages"][name][rnd + "_compiles"] = log["compiles"]
            if rnd == "first":
                out["stages"][name]["slowest_compiles"] = log["slowest"]
    cs, cert = state["cs"], state["cert"]
    out.update(points=int(cs.num_points), relative_error=float(cs.info.get("relative_error", np.nan)),
               omp_iterations=int(cs.info.get("iterations", -1)), kl=float(cert.kl), khat=float(cert.khat),
               verdict=str(cert.verdict), laplace_iterations=int(state["approx"].info["iterations"]),
               laplace_mean=np.asarray(state["approx"].mean).tolist(),
               post_mean=np.asarray(state["post"].samples).reshape(-1, cfg["D"]).mean(0).tolist(),
               peak_rss_mb=common.peak_rss_mb(), process_s=time.perf_counter() - t_start)
    print("JSON" + json.dumps(common.jsonable(out)), flush=True)


def run_profile(args) -> dict:
    work = tempfile.mkdtemp(prefix="cold_path_")
    runs = []
    for path in args.append or []:  # runs of an earlier invocation (another repeat): medians over all
        with open(path) as f:
            earlier = json.load(f)
        runs.extend(dict(r, part=os.path.basename(path), part_commit=earlier["environment"]["git_commit"])
                    for r in earlier["runs"])
    result = {"quick": bool(args.quick), "part": "profile", "D": D, "M": M, "J": J, "subsample": SUBSAMPLE,
              "variants": list(args.variants), "sizes": list(args.sizes), "runs": runs,
              "environment": common.environment(), "load_average_before": list(os.getloadavg()),
              "note": "one fresh process per (variant, N), empty compilation caches; 'first': the stage's first call "
                      "(compilation included), 'second': the same stage again in the same process"}
    for rep in range(args.repeats):
        for n in args.sizes:
            variants = list(args.variants)
            k = rep % len(variants)
            for variant in variants[k:] + variants[:k]:
                cache = tempfile.mkdtemp(prefix="jaxcache_", dir=work)
                env = {k_: v for k_, v in os.environ.items() if not k_.startswith("JAX_PERSISTENT_CACHE")}
                env.update(JAX_COMPILATION_CACHE_DIR=cache, CORESETS_JAX_NO_CACHE="1", CORESETS_JAX_PROGRESS="0",
                           XDG_CACHE_HOME=cache, PYTHONPATH=os.pathsep.join([HERE, BENCH]))
                cfg = {"N": n, "D": D, "M": M, "variant": variant}
                t = time.perf_counter()
                try:
                    res = common.child("import sys; sys.path.insert(0, %r); import cold_path; cold_path.child_main()"
                                       % HERE, json.dumps(cfg), env=env, timeout=3600)
                except Exception as err:
                    res = {"error": f"{type(err).__name__}: {err}"[:500]}
                shutil.rmtree(cache, ignore_errors=True)
                res.update(cfg, repeat=rep, wall_s=time.perf_counter() - t)
                runs.append(res)
                _say(res)
                _write_profile(result, args)
    shutil.rmtree(work, ignore_errors=True)
    result["load_average_after"] = list(os.getloadavg())
    _write_profile(result, args, show=True)
    return result


def _say(res):
    if "error" in res:
        print(f"N={res['N']} {res['variant']}: ERROR {res['error'][:300]}", flush=True)
        return
    parts = "  ".join(f"{k} {v['first_s']:.1f}/{v['first_compile_s']:.1f}c/{v['second_s']:.1f}w"
                      for k, v in res["stages"].items())
    print(f"N={res['N']} {res['variant']:<9} {parts}  points {res['points']} KL {res['kl']:.2e} {res['verdict']}",
          flush=True)


def profile_table(result: dict) -> list:
    rows = []
    for n in result["sizes"]:
        for variant in result["variants"]:
            rs = [r for r in result["runs"] if r["N"] == n and r["variant"] == variant and "error" not in r]
            if not rs:
                continue
            row = {"N": n, "variant": variant, "settings": rs[0]["settings"]}
            for st in STAGES:
                for f in ("first_s", "first_compile_s", "second_s"):
                    row[f"{st}_{f}"] = float(np.median([r["stages"][st][f] for r in rs]))
            row["total_first_s"] = sum(row[f"{st}_first_s"] for st in STAGES)
            row["total_compile_s"] = sum(row[f"{st}_first_compile_s"] for st in STAGES)
            row["total_second_s"] = sum(row[f"{st}_second_s"] for st in STAGES)
            for k in ("points", "kl", "khat", "verdict", "omp_iterations", "relative_error"):
                row[k] = rs[0][k]
            rows.append(row)
    return rows


def profile_markdown(rows: list) -> str:
    head = "| N | variant | " + " | ".join(f"{s} first (compile) / second" for s in STAGES) + " | total first | total compile | KL, points |"
    lines = [head, "|" + "---|" * (len(STAGES) + 5)]
    for r in rows:
        cells = " | ".join(f"{r[f'{s}_first_s']:.1f} ({r[f'{s}_first_compile_s']:.1f}) / {r[f'{s}_second_s']:.1f}"
                           for s in STAGES)
        lines.append(f"| {r['N']:.0e} | {r['variant']} | {cells} | {r['total_first_s']:.1f} | "
                     f"{r['total_compile_s']:.1f} | {r['kl']:.1e}, {r['points']} |")
    return "\n".join(lines)


def _write_profile(result, args, show=False):
    result["table"] = profile_table(result)
    result["table_markdown"] = profile_markdown(result["table"])
    stem = common.stem("cold_path" + args.tag, args.quick)
    path = common.write_json(result, args.out, stem)
    rows = result["table"]
    fig, axes = common.figure(1, 1, size=(10.0, 4.5))
    ax = axes[0][0]
    labels = [f"{r['N']:.0e}\n{r['variant']}" for r in rows]
    bottom = np.zeros(len(rows))
    colors = dict(zip(STAGES, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")))
    for st in STAGES:
        run = np.array([r[f"{st}_first_s"] - r[f"{st}_first_compile_s"] for r in rows])
        comp = np.array([r[f"{st}_first_compile_s"] for r in rows])
        ax.bar(range(len(rows)), comp, bottom=bottom, color=colors[st], alpha=0.45, hatch="//")
        bottom += comp
        ax.bar(range(len(rows)), run, bottom=bottom, color=colors[st], label=st)
        bottom += run
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("seconds, first call in a fresh process (hatched: XLA compilation)")
    ax.set_title(f"Cold path, logistic D = {D}, M = {M} (load {result['load_average_before'][0]:.1f} on "
                 f"{os.cpu_count()} cores)", fontsize=9)
    ax.legend(fontsize=8)
    common.save_figure(fig, args.out, stem)
    if show:
        print(result["table_markdown"])
        print("wrote", path)


# ----------------------------------------------------------------------------------------------------
# Part 2: quality of the variants against full-data NUTS.


def quality_problems(names):
    """name -> (model, data, reference draws (2, S, D) or None: computed and cached in results/tmp/)."""
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj
    import vs_peers

    out = {}
    for name in names:
        if name in ("logistic10_1e5", "logistic10_1e6", "poisson10_1e5"):
            kind = name.split("10")[0]
            n = 1_000_000 if name.endswith("1e6") else 100_000
            X, y, _ = vs_peers.make_data(kind, 10, n)
            if kind == "logistic":
                model, data = cj.models.logistic_regression(), (jnp.asarray(X), jnp.asarray(2 * y - 1))
            else:
                model, data = cj.models.poisson_regression(), (jnp.asarray(X), jnp.asarray(y))
        else:
            ds = cj.load_npz(os.path.join(common.DATA_DIR, name + ".npz"))
            model, data = cj.models.poisson_regression(), (ds.X, ds.y)
        out[name] = (model, data, _reference(name, model, data))
    return out


def _reference(name, model, data):
    """Full-data NUTS: 2 independent runs of 2 chains x (500 + 1000), cached; biketrips_large reuses
    models.py's reference (2 runs of 2 chains x (1000 + 2000))."""
    import jax
    import coresets_jax as cj

    models_ref = os.path.join(TMP, f"models_ref_{name}.npz")
    if os.path.exists(models_ref):
        z = np.load(models_ref)
        return {"a": z["a"], "b": z["b"], "seconds": float(z["seconds"]), "source": models_ref}
    path = os.path.join(TMP, f"cold_path_ref_{name}.npz")
    if not os.path.exists(path):
        os.makedirs(TMP, exist_ok=True)
        t = time.perf_counter()
        runs = [np.asarray(cj.sample(model, data, jax.random.key(100 + i), num_samples=1000, num_warmup=500,
                                     num_chains=2, warn=False).samples, np.float64).reshape(-1, _dim(data))
                for i in range(2)]
        np.savez(path, a=runs[0], b=runs[1], seconds=(time.perf_counter() - t) / 2)
    z = np.load(path)
    return {"a": z["a"], "b": z["b"], "seconds": float(z["seconds"]), "source": path}


def _dim(data):
    return int(data[0].shape[1])


def run_quality(args) -> dict:
    import jax
    import coresets_jax as cj

    problems = quality_problems(args.problems)
    rows = []
    result = {"quick": bool(args.quick), "part": "quality", "M": QUALITY_M, "subsample": SUBSAMPLE, "rows": rows,
              "variants": list(args.variants), "environment": common.environment(),
              "load_average_before": list(os.getloadavg())}
    for name, (model, data, ref) in problems.items():
        n, d = int(data[0].shape[0]), int(data[0].shape[1])
        both = np.concatenate([ref["a"], ref["b"]])
        mean, sd = both.mean(0), both.std(0)
        floor = float(cj.metrics.wasserstein1(ref["a"][:2000], ref["b"][:2000]))
        z2_floor = float(np.mean(((ref["b"].mean(0) - mean) / sd) ** 2))
        for trial in range(args.trials):
            variants = list(args.variants)
            k = trial % len(variants)
            for variant in variants[k:] + variants[:k]:
                key = jax.random.key(trial)
                s = variant_settings(variant, n, d, QUALITY_M)
                t = time.perf_counter()
                pi_hat = None
                if s["subsample"] is not None and s["subsample"] < n:
                    pi_hat = cj.laplace(model, data, key=jax.random.fold_in(key, 7), subsample=s["subsample"])
                cs = cj.coreset(model, data, size=QUALITY_M, method="omp", key=key, pi_hat=pi_hat,
                                num_features=s["num_features"])
                jax.block_until_ready(cs.weights)
                build_s = time.perf_counter() - t
                post = cj.sample(model, data, jax.random.fold_in(key, 1), weights=cs, num_samples=1000,
                                 num_warmup=500, num_chains=2, warn=False)
                cert = cj.certify(model, data, cs, post.samples)
                draws = np.asarray(post.samples, np.float64).reshape(-1, d)
                row = {"problem": name, "N": n, "D": d, "variant": variant, "trial": trial, **s,
                       "build_s": build_s, "points": int(cs.num_points),
                       "z2": float(np.mean(((draws.mean(0) - mean) / sd) ** 2)),
                       "max_z": float(np.max(np.abs(draws.mean(0) - mean) / sd)),
                       "w1_floor": float(cj.metrics.wasserstein1(ref["a"][:2000], draws[:2000])) / floor,
                       "kl": float(cert.kl), "kl_se": float(cert.kl_se), "khat": float(cert.khat),
                       "verdict": str(cert.verdict), "z2_floor": z2_floor}
                rows.append(row)
                print(json.dumps(row), flush=True)
                _write_quality(result, args)
    result["load_average_after"] = list(os.getloadavg())
    _write_quality(result, args, show=True)
    return result


def quality_table(rows: list) -> list:
    out = []
    for (p, v) in dict.fromkeys((r["problem"], r["variant"]) for r in rows):
        rs = [r for r in rows if r["problem"] == p and r["variant"] == v]
        out.append({"problem": p, "variant": v, "trials": len(rs), "num_features": rs[0]["num_features"],
                    "subsample": rs[0]["subsample"], "z2_floor": rs[0]["z2_floor"],
                    **{k: float(np.median([r[k] for r in rs])) for k in ("z2", "max_z", "w1_floor", "kl", "khat",
                                                                         "points", "build_s")},
                    "kl_max": float(np.max([r["kl"] for r in rs])), "z2_max": float(np.max([r["z2"] for r in rs])),
                    "verdicts": [r["verdict"] for r in rs]})
    return out


def quality_markdown(table: list) -> str:
    lines = ["| problem | variant | J | Laplace rows | z2 (max) | z2 floor | max abs z | W1/floor | KL (max) | k-hat | points | build s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {r['problem']} | {r['variant']} | {r['num_features']} | {r['subsample'] or 'all'} | "
                     f"{r['z2']:.2e} ({r['z2_max']:.2e}) | {r['z2_floor']:.1e} | {r['max_z']:.3f} | {r['w1_floor']:.2f} | "
                     f"{r['kl']:.1e} ({r['kl_max']:.1e}) | {r['khat']:.2f} | {r['points']:.0f} | {r['build_s']:.1f} |")
    return "\n".join(lines)


def _write_quality(result, args, show=False):
    result["table"] = quality_table(result["rows"])
    result["table_markdown"] = quality_markdown(result["table"])
    stem = common.stem("cold_path_quality" + args.tag, args.quick)
    path = common.write_json(result, args.out, stem)
    problems = list(dict.fromkeys(r["problem"] for r in result["rows"]))
    fig, axes = common.figure(1, max(len(problems), 1), size=(4.5, 4.0))
    for ax, p in zip(axes[0], problems):
        for i, v in enumerate(result["variants"]):
            rs = [r for r in result["rows"] if r["problem"] == p and r["variant"] == v]
            ax.scatter([i] * len(rs), [max(r["z2"], 1e-8) for r in rs], label="z2" if i == 0 else None, color="k")
            ax.scatter([i + 0.15] * len(rs), [max(r["kl"], 1e-8) for r in rs], marker="x", color="tab:red",
                       label="certificate KL" if i == 0 else None)
        ax.set_xticks(range(len(result["variants"])))
        ax.set_xticklabels(result["variants"], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(p, fontsize=9)
        ax.legend(fontsize=7)
    common.save_figure(fig, args.out, stem)
    if show:
        print(result["table_markdown"])
        print("wrote", path)


def run_certify(args, n: int = 500_000, repeats: int = 3) -> dict:
    """The certificate's cost at scale, compiled, in this process: the default (float64, all 2 x 400 draws)
    against precision="float32" and against 200 evenly thinned draws (both existing options of cj.certify),
    alternating (common.alternate), with each one's KL estimate."""
    import jax
    import coresets_jax as cj
    import vs_peers

    scope: dict = {}
    exec(vs_peers.MODEL_CODE, scope)
    X, y, _ = vs_peers.make_data("logistic", D, n)
    model, data = cj.from_numpyro(scope["logistic"], jax.device_put(X), jax.device_put(y))
    key = jax.random.key(0)
    cs = cj.coreset(model, data, size=M, method="omp", key=key)
    post = cj.sample(model, data, key, weights=cs, num_samples=400, num_warmup=400, num_chains=2, warn=False)
    draws = post.samples
    thinned = draws[:, ::4]
    variants = {"float64, 800 draws": lambda: cj.certify(model, data, cs, draws).kl,
                "float32, 800 draws": lambda: cj.certify(model, data, cs, draws, precision="float32").kl,
                "float64, 200 draws": lambda: cj.certify(model, data, cs, thinned).kl}
    times = common.alternate(variants, repeats, runs=True)
    certs = {"float64, 800 draws": cj.certify(model, data, cs, draws),
             "float32, 800 draws": cj.certify(model, data, cs, draws, precision="float32"),
             "float64, 200 draws": cj.certify(model, data, cs, thinned)}
    result = {"part": "certify", "N": n, "D": D, "M": M, "repeats": repeats, "quick": bool(args.quick),
              "rows": [{"variant": k, "median_s": float(np.median(times[k])), "runs_s": times[k],
                        "kl": float(c.kl), "kl_se": float(c.kl_se), "khat": float(c.khat), "verdict": str(c.verdict)}
                       for k, c in certs.items()],
              "environment": common.environment(), "load_average": list(os.getloadavg()),
              "note": "compiled calls (one warm-up each), alternating; in-process"}
    for r in result["rows"]:
        print(json.dumps(r), flush=True)
    common.write_json(result, args.out, common.stem("cold_path_certify" + args.tag, args.quick))
    return result


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--profile", action="store_true")
        p.add_argument("--quality", action="store_true")
        p.add_argument("--sizes", nargs="+", type=int, default=[500_000, 1_000_000])
        p.add_argument("--variants", nargs="+", default=None, help=f"default: profile {list(VARIANTS)}, quality {list(QUALITY_VARIANTS)}")
        p.add_argument("--repeats", type=int, default=1)
        p.add_argument("--problems", nargs="+", default=["logistic10_1e5", "poisson10_1e5", "biketrips_large"])
        p.add_argument("--tag", default="")
        p.add_argument("--append", nargs="+", default=None, metavar="JSON",
                       help="profile: keep the runs of these earlier result files (medians over all)")
        p.add_argument("--certify", action="store_true",
                       help="compiled cj.certify at N = 5e5: float64 / float32 / 200 thinned draws, alternating")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    args.trials = args.trials or 2
    if args.quick:
        args.sizes, args.variants = [20_000], ["default", "sub+auto"]
    variants = args.variants
    out = {}
    if args.certify:
        out["certify"] = run_certify(args)
        return out
    if args.quality:
        args.variants = variants or list(QUALITY_VARIANTS)
        out["quality"] = run_quality(args)
    if args.profile or not args.quality:
        args.variants = variants or list(VARIANTS)
        out["profile"] = run_profile(args)
    return out


if __name__ == "__main__":
    main()
