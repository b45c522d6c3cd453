"""First calls in fresh processes: how long a researcher waits, with an empty and with a warm compilation cache.

Problem: logistic regression with N = 569 rows and D = 31 (30 standardised, correlated features and an
intercept: the shape of the Wisconsin breast-cancer set, generated here), M = 100. Every measurement runs in
a fresh Python process; the rows below alternate in each repeat and the table reports medians:

- `quickstart`: the README's JAX quickstart script, read from README.md (N = 10,000 synthetic logistic
  regression: GIGA, NUTS 500 + 500, a certificate, A-IHT II with certify=True, save and load), whole process
  including imports;
- `coreset:<method>`: the first `cj.coreset(model, data, size=100, method=...)` for GIGA, A-IHT II and
  Coreset MCMC (and the second call, compiled);
- `sample:<kernel>`: the first `cj.sample` (500 warm-up + 500 draws, 2 chains) on a GIGA coreset, for NUTS
  and MALA; the process also times its first `cj.coreset` (GIGA), so `coreset + sample` is the first
  coreset plus the first sample of a new process;
- `numpyro`: NumPyro's NUTS on all 569 rows (2 vectorised chains, 500 + 500), first and second run: what a
  user would run instead. Always without a persistent cache (NumPyro keeps none);
- `reference` (with `--reference-library PATH`): the reference NumPy library's GIGA coreset on the same
  data, whole script.

Each coresets_jax row runs twice per repeat: with an empty cache (a fresh XDG_CACHE_HOME, so the package's
default cache starts empty) and with a warm one (a folder filled by an earlier process of the same row).
Each process records its XLA compilations from JAX's compile log (count, seconds, persistent-cache hits).
Progress bars are off (CORESETS_JAX_PROGRESS=0). Writes benchmarks/results/cold_start.json and .png.

    python benchmarks/cold_start.py [--repeats 3] [--reference-library PATH]
    python benchmarks/cold_start.py --quick       # CI: one repeat of coreset:giga and numpyro
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]
import common  # noqa: E402

N, D, M = 569, 31, 100
ROWS = ("quickstart", "coreset:giga", "coreset:iht2", "coreset:coreset_mcmc", "sample:nuts", "sample:mala")
QUICK_ROWS = ("coreset:giga",)

# The problem, identical in every process: correlated standardised features (a few latent factors, as
# the breast-cancer measurements of one nucleus are), labels from a sparse logistic model.
DATA = r"""
import numpy as np
def breast_cancer_like(n=%d, d=%d, seed=0):
    rng = np.random.default_rng(seed)
    factors = rng.standard_normal((n, 5))
    Z = factors @ rng.standard_normal((5, d - 1)) + 0.5 * rng.standard_normal((n, d - 1))
    Z = (Z - Z.mean(0)) / Z.std(0)
    beta = np.zeros(d - 1); beta[:8] = rng.normal(0, 1.0, 8)
    p = 1 / (1 + np.exp(-(Z @ beta - 0.5)))
    y = np.where(rng.random(n) < p, 1.0, -1.0)
    X = np.concatenate([Z, np.ones((n, 1))], 1)
    return X.astype(np.float32), y.astype(np.float32)
""" % (N, D)

# A compile log of the process: XLA compilations (count, seconds) and persistent-cache hits.
LOG = r"""
import logging, re, time
_compiles = []
class _Log(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        m = re.search(r"Finished XLA compilation of (.*?) in ([0-9.e-]+) sec", msg)
        if m:
            _compiles.append((m.group(1), float(m.group(2))))
        elif "Persistent compilation cache hit" in msg:
            _compiles.append(("hit", -1.0))
def compile_log():
    xla = [c for c in _compiles if c[1] >= 0]
    return {"compiles": len(xla), "compile_s": sum(c[1] for c in xla),
            "cache_hits": sum(1 for c in _compiles if c[1] < 0),
            "slowest": sorted(xla, key=lambda c: -c[1])[:4]}
_handler = _Log()
def start_log():
    import jax
    jax.config.update("jax_log_compiles", True)
    _handler.setLevel(logging.DEBUG)
    for name in ("jax._src.dispatch", "jax._src.compiler"):
        lg = logging.getLogger(name)
        if _handler not in lg.handlers:
            lg.addHandler(_handler)
        lg.setLevel(logging.DEBUG); lg.propagate = False
    _compiles.clear()
"""

CHILD = DATA + LOG + r"""
import json, sys, time, warnings
t_start = time.perf_counter()
import jax, jax.numpy as jnp
row = sys.argv[1]
out = {"row": row}
if row == "numpyro":
    import numpyro, numpyro.distributions as dist
    from numpyro.infer import MCMC, NUTS
    X, y = breast_cancer_like()
    def model(X, y):
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=(y + 1) / 2)
    X, y = jnp.asarray(X), jnp.asarray(y)
    start_log()
    for name in ("first_s", "second_s"):
        t = time.perf_counter()
        mcmc = MCMC(NUTS(model), num_warmup=500, num_samples=500, num_chains=2, chain_method="vectorized",
                    progress_bar=False)
        mcmc.run(jax.random.key(0), X, y)
        jax.block_until_ready(mcmc.get_samples())
        out[name] = time.perf_counter() - t
        if name == "first_s":
            out["log"] = compile_log()
else:
    import coresets_jax as cj
    out["cache_dir"] = cj.compilation_cache()
    X, y = breast_cancer_like()
    data = (jnp.asarray(X), jnp.asarray(y))
    model = cj.models.logistic_regression()
    key = jax.random.key(0)
    jax.block_until_ready(data)
    out["import_s"] = time.perf_counter() - t_start
    warnings.simplefilter("ignore", RuntimeWarning)  # short runs may warn about ESS; not what is timed
    start_log()
    kind, method = row.split(":")
    def coreset(m):
        t = time.perf_counter()
        cs = cj.coreset(model, data, size=%d, method=m, key=key)
        jax.block_until_ready(cs.weights)
        return cs, time.perf_counter() - t
    if kind == "coreset":
        cs, out["first_s"] = coreset(method)
        out["log"] = compile_log()
        if method != "coreset_mcmc":  # its run, not its compilation, takes minutes: timed once
            _, out["second_s"] = coreset(method)
        out["points"] = cs.num_points
        out["info"] = {k: float(v) for k, v in cs.info.items() if getattr(v, "ndim", 1) == 0 and k in ("iterations", "converged", "relative_error")}
    else:
        cs, out["coreset_s"] = coreset("giga")
        coreset_log = compile_log()
        start_log()
        def sample():
            t = time.perf_counter()
            post = cj.sample(model, data, key, weights=cs, method=method, num_samples=500, num_warmup=500)
            jax.block_until_ready(post.samples)
            return post, time.perf_counter() - t
        post, out["first_s"] = sample()
        out["log"] = compile_log()
        out["coreset_log"] = coreset_log
        _, out["second_s"] = sample()
        out["mean_abs_theta"] = float(jnp.mean(jnp.abs(post.mean)))
out["process_s"] = time.perf_counter() - t_start
print(json.dumps(out))
""" % M

REFERENCE = DATA + r"""
import json, logging, sys, time
t0 = time.perf_counter()
import numpy as np
sys.path.insert(0, sys.argv[1])
import bayesiancoresets as bc
logging.disable(logging.WARNING)
X, y = breast_cancer_like()
X, y = X.astype(np.float64), y.astype(np.float64)
theta = np.zeros(X.shape[1])  # Laplace: Newton on the logistic log posterior (prior N(0, I)), in NumPy
for _ in range(50):
    s = 1 / (1 + np.exp(y * (X @ theta)))
    grad = (X * (y * s)[:, None]).sum(0) - theta
    hess = -(X.T * (s * (1 - s))) @ X - np.eye(X.shape[1])
    step = np.linalg.solve(hess, grad)
    theta = theta - step
    if np.linalg.norm(step) < 1e-8:
        break
rng = np.random.default_rng(0)
thetas = rng.multivariate_normal(theta, np.linalg.inv(-hess), 500)
coords = rng.integers(0, X.shape[1], 500)
s = 1 / (1 + np.exp(y[:, None] * (X @ thetas.T)))  # (N, J): d/dtheta L_n = y_n x_n s_nj
V = np.sqrt(X.shape[1] / 500) * (y[:, None] * s) * X[:, coords]  # Fisher features (HC Eq. 5.7)
t1 = time.perf_counter()
alg = bc.snnls.GIGA(V.T.copy(), V.T.sum(1))
alg.build(%d)
print(json.dumps({"row": "reference", "build_s": time.perf_counter() - t1, "process_s": time.perf_counter() - t0,
                  "points": int(np.sum(alg.weights() > 0))}))
""" % M


# The README's JAX quickstart itself (never a copy that could drift), timed from the process start.
QUICKSTART = ("import time\nt0 = time.perf_counter()\n" + common.readme_block("## Quickstart: a JAX model")
              + "import json\nprint(json.dumps({\"row\": \"quickstart\", \"process_s\": time.perf_counter() - t0}))\n")


def _env(cache_home: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "CORESETS_JAX_NO_CACHE")}
    env.update(XDG_CACHE_HOME=cache_home, CORESETS_JAX_PROGRESS="0", PYTHONPATH=ROOT)
    return env


def _run(script: str, args: list, env: dict, cwd: str, timeout: int = 1800) -> dict:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=timeout)
    wall = time.perf_counter() - t
    if out.returncode != 0:
        return {"error": out.stderr[-1500:], "wall_s": wall}
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall_s"] = wall  # the whole process, from the parent's side
    return res


def _measure(row: str, cache: str, work: str, warm_dirs: dict) -> dict:
    """One fresh process of `row` with an empty ("empty") or warm ("warm") default cache."""
    if cache == "empty":
        home = tempfile.mkdtemp(prefix="cache_", dir=work)
    else:
        home = warm_dirs[row]
    env = _env(home)
    if row == "quickstart":
        res = _run(QUICKSTART, [], env, cwd=tempfile.mkdtemp(prefix="qs_", dir=work))
    else:
        res = _run(CHILD, [row], env, cwd=work)
    if cache == "empty":
        shutil.rmtree(home, ignore_errors=True)
    res["cache"] = cache
    return res


def _load() -> list:
    return [round(x, 2) for x in os.getloadavg()]


def _median(runs: list, key: str):
    vals = [r[key] for r in runs if key in r and "error" not in r]
    return float(np.median(vals)) if vals else None


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat of coreset:giga and numpyro")
    parser.add_argument("--reference-library", default=None, metavar="PATH",
                        help="a checkout of the reference library (its folder holding bayesiancoresets/)")
    parser.add_argument("--rows", default=None, help="comma-separated subset of the rows")
    parser.add_argument("--out", default=common.RESULTS)
    args = parser.parse_args([] if argv is None and (quick is not None or out_dir is not None) else argv)
    if quick is not None:
        args.quick = quick
    if out_dir is not None:
        args.out = out_dir
    rows = QUICK_ROWS if args.quick else ROWS
    if args.rows:
        rows = tuple(args.rows.split(","))
    repeats = 1 if args.quick else args.repeats
    work = tempfile.mkdtemp(prefix="cold_start_")
    load_before = _load()
    t_start = time.perf_counter()
    # Warm caches: one process per row fills its own folder first (not timed).
    warm_dirs = {}
    for row in rows:
        warm_dirs[row] = tempfile.mkdtemp(prefix="warm_", dir=work)
        _measure(row, "warm", work, warm_dirs)
    runs = {f"{row}|{cache}": [] for row in rows for cache in ("empty", "warm")}
    runs["numpyro"] = []
    runs["reference"] = []
    for rep in range(repeats):
        for row in rows:
            for cache in ("empty", "warm"):
                res = _measure(row, cache, work, warm_dirs)
                runs[f"{row}|{cache}"].append(res)
                print(f"[{rep}] {row:<22} {cache:<5} " + ("ERROR " + res["error"][-300:] if "error" in res else
                      f"first {res.get('first_s', res.get('process_s', 0)):.2f} s  "
                      f"compiles {res.get('log', {}).get('compiles', '-')}  hits {res.get('log', {}).get('cache_hits', '-')}"),
                      flush=True)
        res = _run(CHILD, ["numpyro"], _env(tempfile.mkdtemp(prefix="np_", dir=work)), cwd=work)
        runs["numpyro"].append(res)
        print(f"[{rep}] numpyro NUTS first {res.get('first_s', float('nan')):.2f} s", flush=True)
        if args.reference_library:
            res = _run(REFERENCE, [os.path.abspath(args.reference_library)], dict(os.environ), cwd=work)
            runs["reference"].append(res)
            print(f"[{rep}] reference library, whole script {res.get('process_s', float('nan')):.2f} s", flush=True)
        _write(args, rows, repeats, runs, load_before, t_start, partial=rep + 1 < repeats)
    shutil.rmtree(work, ignore_errors=True)
    return _write(args, rows, repeats, runs, load_before, t_start, partial=False, show=True)


def _write(args, rows, repeats, runs, load_before, t_start, partial: bool, show: bool = False) -> dict:
    """Summarise the runs so far and write the JSON and PNG (after every repeat: a long run that is stopped
    keeps its finished repeats)."""
    summary = {}
    for name, rs in runs.items():
        if not rs:
            continue
        entry = {k: _median(rs, k) for k in ("first_s", "second_s", "coreset_s", "process_s", "wall_s", "build_s")
                 if _median(rs, k) is not None}
        logs = [r["log"] for r in rs if "log" in r]
        if logs:
            entry["compiles"] = float(np.median([lg["compiles"] for lg in logs]))
            entry["compile_s"] = float(np.median([lg["compile_s"] for lg in logs]))
            entry["cache_hits"] = float(np.median([lg["cache_hits"] for lg in logs]))
            entry["slowest_compiles"] = logs[0]["slowest"]
        entry["errors"] = sum(1 for r in rs if "error" in r)
        entry["n"] = len(rs)
        summary[name] = entry
    numpyro_first = summary.get("numpyro", {}).get("first_s")
    targets = {}

    def ratio(a):
        return None if a is None or not numpyro_first else a / numpyro_first
    if "coreset:giga|empty" in summary:
        targets["coreset_giga_empty_s"] = {"value": summary["coreset:giga|empty"].get("first_s"), "target": 2.0}
    if "coreset:coreset_mcmc|empty" in summary:
        targets["coreset_mcmc_empty_s"] = {"value": summary["coreset:coreset_mcmc|empty"].get("first_s"),
                                           "target": 4.0}
    if "sample:nuts|empty" in summary:
        targets["sample_nuts_empty_over_numpyro"] = {"value": ratio(summary["sample:nuts|empty"].get("first_s")),
                                                     "target": 0.7}
    if "sample:nuts|warm" in summary:
        warm = summary["sample:nuts|warm"]
        both = (warm.get("coreset_s") or 0) + (warm.get("first_s") or 0)
        targets["coreset_plus_sample_warm_over_numpyro"] = {"value": ratio(both), "target": 0.35}
    for t in targets.values():
        t["met"] = None if t["value"] is None else bool(t["value"] <= t["target"])
    result = {
        "quick": bool(args.quick), "partial": partial,
        "problem": {"N": N, "D": D, "M": M, "data": "synthetic, breast-cancer-like (5 latent factors, standardised)",
                    "sample": "500 warm-up + 500 draws, 2 chains"},
        "repeats": repeats, "rows": list(rows), "summary": summary, "targets": targets, "runs": runs,
        "load_average_before": load_before, "load_average_after": _load(), "total_s": time.perf_counter() - t_start,
        "environment": common.environment(),
        "note": "fresh process per measurement, rows alternating; medians over repeats. 'empty': the package's "
                "default cache in a fresh folder; 'warm': a folder filled by an earlier process of the same row.",
    }
    stem = common.stem("cold_start", args.quick)
    path = common.write_json(result, args.out, stem)
    _plot(result, args.out, stem)
    if show:
        print(_table(result))
        print("wrote", path)
    return result


def _table(result: dict) -> str:
    s = result["summary"]
    lines = ["| call | empty cache: first call | compilations | warm cache: first call | compilations (hits) | "
             "second call |", "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        e, w = s.get(f"{row}|empty", {}), s.get(f"{row}|warm", {})
        first = "process_s" if row == "quickstart" else "first_s"
        def f(x):
            return "-" if x is None else f"{x:.2f} s"
        lines.append(f"| {row} | {f(e.get(first))} | {e.get('compiles', '-')} | {f(w.get(first))} | "
                     f"{w.get('compiles', '-')} ({w.get('cache_hits', '-')}) | {f(e.get('second_s'))} |")
    n = s.get("numpyro", {})
    if n:
        lines.append(f"| NumPyro NUTS, all {N} rows | {n.get('first_s', 0):.2f} s | {n.get('compiles', '-')} | - | - | "
                     f"{n.get('second_s', 0):.2f} s |")
    return "\n".join(lines)


def _plot(result: dict, out_dir: str, stem: str) -> None:
    fig, axes = common.figure(1, 1, size=(9.0, 4.5))
    ax = axes[0][0]
    s = result["summary"]
    rows = result["rows"]
    x = np.arange(len(rows))
    first = lambda row, cache: s.get(f"{row}|{cache}", {}).get("process_s" if row == "quickstart" else "first_s") or 0.0
    ax.bar(x - 0.2, [first(r, "empty") for r in rows], 0.4, label="empty cache")
    ax.bar(x + 0.2, [first(r, "warm") for r in rows], 0.4, label="warm cache")
    if s.get("numpyro", {}).get("first_s"):
        ax.axhline(s["numpyro"]["first_s"], color="k", ls="--", lw=1, label="NumPyro NUTS, first call")
    ax.set_xticks(x)
    ax.set_xticklabels(rows, rotation=20, ha="right")
    ax.set_ylabel("seconds (median, fresh process)")
    ax.set_title(f"First calls, N = {N}, D = {D}, M = {M} (load {result['load_average_before'][0]})")
    ax.legend()
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
