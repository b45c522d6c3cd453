"""At scale, against what users run instead (issue 36): time to a posterior, from a fresh process, against N.

Problems: logistic and Poisson regression written once as NumPyro models (`MODEL_CODE`; `numpyro.subsample`
inside the data plate so that HMCECS can subsample them), D in {10, 50}, synthetic rows x = [N(0, I_{D-1}), 1]
with a fixed true theta (logistic: theta ~ N(0, 9 / D), so X theta has sd about 3; Poisson with rate
softplus(X theta): theta ~ N(0, 1 / D)); prior N(0, I). Sizes N in {1e5, 5e5, 1e6, 5e6} where time and memory
allow. Every contender sees the same NumPyro model:

- `nuts`: NumPyro NUTS on all rows, 2 chains x (400 warm-up + 400 draws), chain_method="vectorized" (the
  faster of the two at N = 1e5 in this file's --chain-method check; `CHAIN_METHOD`), NumPyro's default
  init_to_uniform and adaptation;
- `hmcecs`: NumPyro HMCECS as in NumPyro's example (examples/hmcecs.py): the MAP from SVI with AutoDelta
  (Adam 1e-3, 5,000 steps on subsamples of 1,000), a second-order Taylor proxy at it, subsample 1,000,
  num_blocks 100, NUTS inner kernel; 2 chains x (400 + 400) run sequentially (HMCECS has no vectorized
  chains);
- `sgld`: SGLD with control variates at the full-data Laplace mode, BlackJAX's kernel through
  `sgmcmc_baselines.run_sg` (batch 500, 2 chains, `SGLD_STEPS` steps per chain, 10% burn-in; the Laplace
  fit counted in its time);
- `ours_fixed`: `cj.coreset(model, data, size=M, method="omp", key)` on `cj.from_numpyro(model, X, y)`
  (M = 10 D unless --M), then `cj.sample(model, data, key, weights=cs)` (NUTS, 2 chains x (400 + 400)), then
  `cj.certify(model, data, cs, post.samples)`; package defaults (Laplace on all rows; J from
  `cj.features.projection.auto_num_features(D, M, N)`: 500 up to N = 134,217, 160 at D = 10 from N = 4.2e5);
- `ours_auto`: `cj.coreset(model, data, key=key, tol=0.1)` (its certificate attached), then `cj.sample`;
- `ours_auto_draws`: the same search, whose own NUTS draws of the returned coreset (`cs.info["samples"]`,
  2 chains x (500 + 500), the draws its certificate weighed) are the posterior: no further `cj.sample`;
- `ours_options`: `ours_fixed` with the two options of investigations/cold_path.py instead of the defaults:
  pi_hat = `cj.laplace(..., subsample=10_000)` and J = max(32, 8 D) (`OPTIONS_FEATURES`);
- `ours_candidates`, `ours_auto_candidates`: `ours_fixed` and `ours_auto` with `candidate_rows=100_000`: OMP
  chooses among a uniform 100,000 rows and fits the full data's feature sum (one streamed pass over N).

Each contender runs in a FRESH Python process with empty compilation caches (JAX_COMPILATION_CACHE_DIR a new
empty folder per process, CORESETS_JAX_NO_CACHE=1): `cold_s` is its first call, data already in memory
(imports and data generation are recorded apart); `warm_s` a second identical call in the same process (run
when the first took under `--warm-max` = 150 seconds; otherwise it is about the first less its compilation).
Contenders of a cell run one after another in a rotating order, so a change of load on the shared machine
hits them alike; with --repeats > 1 the table gives medians.

Quality: max |z| of the posterior mean, z_d = (mean_d - ref_mean_d) / ref_sd_d, and W1 / floor, with the
reference the full-data NUTS run of the same cell (pooled chains; floor = W1 between its two chains, 400 draws
each; a contender's W1 is from 400 evenly thinned draws to the reference's first chain). NUTS's own entry is
chain against chain (its z: |mean_A - mean_B| / sd). Where NUTS does not fit the budget, the reference is a
long HMCECS run (`hmcecs_long`: 2 chains x (1,000 + 2,000)), marked in the table.

    python benchmarks/vs_peers.py                                 # the full grid (hours)
    python benchmarks/vs_peers.py --models logistic10 --sizes 100000 500000 1000000
    python benchmarks/vs_peers.py --quick                         # CI smoke run, tiny N, one process
Writes results/vs_peers.json and .png (vs_peers_quick.* with --quick), after every cell.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]
import common  # noqa: E402

CONTENDERS = ("nuts", "nuts_jit_args", "hmcecs", "sgld", "ours_fixed", "ours_auto", "ours_auto_draws", "ours_options",
              "ours_candidates", "ours_auto_candidates")
CANDIDATE_ROWS = 100_000  # ours_candidates, ours_auto_candidates: cj.coreset(..., candidate_rows=...)
OPTIONS_SUBSAMPLE = 10_000  # ours_options: Laplace fit on this many rows (cj.laplace(..., subsample=n))
# Full-data NUTS runs, in the order a cell's reference is taken from: NumPyro's defaults (the model's data
# closed over as constants of the compiled programs), then jit_model_args=True (the data as arguments; on a
# GPU the defaults did not finish within 120 s at N >= 1e6).
FULL_NUTS = ("nuts", "nuts_jit_args")
MODELS = {"logistic10": ("logistic", 10), "logistic50": ("logistic", 50),
          "poisson10": ("poisson", 10), "poisson50": ("poisson", 50)}
SIZES = (100_000, 500_000, 1_000_000, 5_000_000)
CHAIN_METHOD = "vectorized"
CHAINS, WARMUP, DRAWS = 2, 400, 400
SGLD_STEPS = 10_000
HMCECS = {"subsample": 1000, "svi_steps": 5000, "svi_lr": 1e-3, "num_blocks": 100}
HMCECS_LONG = {"warmup": 1000, "draws": 2000}
TOL = 0.1
MULT_M = 10  # ours_fixed's default M = 10 D
V_MEMORY_LIMIT = 4 << 30  # bytes of V (N x J float32) above which our route is skipped on this shared machine


def OPTIONS_FEATURES(d: int) -> int:  # noqa: N802 (a rule named like the constants around it)
    """J of `ours_options`: max(32, 8 D), investigations/cold_path.py's `auto` variant."""
    return max(32, 8 * d)


QUICK_CONTENDERS = ("nuts", "sgld", "ours_fixed")  # the cheapest to compile; --contenders adds the others
QUICK = {"models": {"logistic3": ("logistic", 3)}, "sizes": (2000,), "warmup": 150, "draws": 150,
         "sgld_steps": 1000, "M": 50, "hmcecs": {"subsample": 200, "svi_steps": 300, "svi_lr": 1e-2,
                                                 "num_blocks": 10}}

# The model every contender runs: NumPyro, with numpyro.subsample so that HMCECS can subsample the plate.
MODEL_CODE = r"""
import jax, jax.numpy as jnp, numpyro, numpyro.distributions as dist

def logistic(X, y=None, subsample_size=None):
    theta = numpyro.sample("theta", dist.Normal(jnp.zeros(X.shape[1]), 1.0).to_event(1))
    with numpyro.plate("N", X.shape[0], subsample_size=subsample_size):
        xb = numpyro.subsample(X, event_dim=1)
        yb = numpyro.subsample(y, event_dim=0)
        numpyro.sample("obs", dist.Bernoulli(logits=xb @ theta), obs=yb)

def poisson(X, y=None, subsample_size=None):
    theta = numpyro.sample("theta", dist.Normal(jnp.zeros(X.shape[1]), 1.0).to_event(1))
    with numpyro.plate("N", X.shape[0], subsample_size=subsample_size):
        xb = numpyro.subsample(X, event_dim=1)
        yb = numpyro.subsample(y, event_dim=0)
        numpyro.sample("obs", dist.Poisson(jax.nn.softplus(xb @ theta)), obs=yb)
"""


def make_data(kind: str, d: int, n: int, seed: int = 0):
    """(X, y) as float32 NumPy arrays: x = [N(0, I_{D-1}), 1], the true theta fixed by (kind, D)."""
    rng = np.random.default_rng([seed, d, 0 if kind == "logistic" else 1])
    theta = rng.standard_normal(d) * (3.0 if kind == "logistic" else 1.0) / np.sqrt(d)
    rows = np.random.default_rng([seed, d, n])
    X = np.empty((n, d), np.float32)
    X[:, :-1] = rows.standard_normal((n, d - 1), dtype=np.float32)
    X[:, -1] = 1.0
    eta = X @ theta.astype(np.float32)
    if kind == "logistic":
        y = (rows.random(n, dtype=np.float32) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float32)
    else:
        y = rows.poisson(np.logaddexp(0.0, eta)).astype(np.float32)
    return X, y, theta


# ----------------------------------------------------------------------------------------------------
# The child: one contender in a fresh process.


def _numpyro_mcmc(fn, X, y, key, kernel, warmup, draws, chain_method, jit_model_args=False, info=None,
                  **run_kwargs):
    """Draws (chains, S, D). With `info` (NUTS kernels): info gains the leapfrog steps per kept draw, mean
    and max, which show a run whose trees reached their maximum depth (1,023 steps)."""
    from numpyro.infer import MCMC

    mcmc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=CHAINS, chain_method=chain_method,
                progress_bar=False, jit_model_args=jit_model_args)
    mcmc.run(key, X, y, extra_fields=("num_steps",) if info is not None else (), **run_kwargs)
    if info is not None:
        steps = np.asarray(mcmc.get_extra_fields()["num_steps"])
        info.update(mean_leapfrog_steps=float(steps.mean()), max_leapfrog_steps=int(steps.max()))
    return np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])


def _hmcecs(fn, X, y, key, warmup, draws, settings):
    """NumPyro's HMCECS example (examples/hmcecs.py): MAP by SVI (AutoDelta), Taylor proxy there, NUTS inside."""
    import jax
    import numpyro
    from numpyro.infer import HMCECS, NUTS, SVI, Trace_ELBO, autoguide

    svi_key, mcmc_key = jax.random.split(key)
    guide = autoguide.AutoDelta(fn)
    svi = SVI(fn, guide, numpyro.optim.Adam(step_size=settings["svi_lr"]), loss=Trace_ELBO())
    svi_result = svi.run(svi_key, settings["svi_steps"], X, y, settings["subsample"], progress_bar=False)
    ref_params = {"theta": svi_result.params["theta_auto_loc"]}
    kernel = HMCECS(NUTS(fn), num_blocks=settings["num_blocks"], proxy=HMCECS.taylor_proxy(ref_params))
    draws_ = _numpyro_mcmc(fn, X, y, mcmc_key, kernel, warmup, draws, "sequential",
                           subsample_size=settings["subsample"])
    return draws_, {"map": np.asarray(ref_params["theta"]).tolist()}


_MODELS: dict = {}


def run_contender(name: str, fn, X, y, key, cfg: dict):
    """One call of contender `name`: (draws (chains, S, D) as NumPy, info dict with stage seconds)."""
    import jax
    import jax.numpy as jnp
    import coresets_jax as cj
    from numpyro.infer import NUTS

    warmup, draws = cfg["warmup"], cfg["draws"]
    info = {}
    t0 = time.perf_counter()
    if name == "nuts":
        out = _numpyro_mcmc(fn, X, y, key, NUTS(fn), warmup, draws, cfg.get("chain_method", CHAIN_METHOD),
                            info=info)
    elif name == "nuts_jit_args":  # the data as arguments of the compiled programs, not constants in them
        out = _numpyro_mcmc(fn, X, y, key, NUTS(fn), warmup, draws, cfg.get("chain_method", CHAIN_METHOD),
                            jit_model_args=True, info=info)
    elif name == "nuts_sequential":
        out = _numpyro_mcmc(fn, X, y, key, NUTS(fn), warmup, draws, "sequential", info=info)
    elif name == "hmcecs":
        out, extra = _hmcecs(fn, X, y, key, warmup, draws, cfg["hmcecs"])
        info.update(extra)
    elif name == "hmcecs_long":
        out, extra = _hmcecs(fn, X, y, key, HMCECS_LONG["warmup"], HMCECS_LONG["draws"], cfg["hmcecs"])
        info.update(extra)
    elif name == "sgld":
        import sgmcmc_baselines

        if (fn, id(X)) not in _MODELS:
            _MODELS[(fn, id(X))] = cj.from_numpyro(fn, X, y)
        model, data = _MODELS[(fn, id(X))]
        res = sgmcmc_baselines.run_sg({"model": model, "data": data}, "sgld", cfg["sgld_steps"], key, None)
        out = np.asarray(res.samples)
        info.update(step_size=res.step_size, gradient_evaluations=res.gradient_evaluations)
    elif name in ("ours_fixed", "ours_auto", "ours_auto_draws", "ours_options", "ours_candidates",
                  "ours_auto_candidates"):
        # cj.from_numpyro once per process (timed in the first call): a user's second call reuses the model;
        # a new Model object is a new static argument, so every program would be compiled again.
        if (fn, id(X)) not in _MODELS:
            _MODELS[(fn, id(X))] = cj.from_numpyro(fn, X, y)
        model, data = _MODELS[(fn, id(X))]
        candidates = {"candidate_rows": CANDIDATE_ROWS} if name.endswith("_candidates") else {}
        if name in ("ours_fixed", "ours_candidates"):
            cs = cj.coreset(model, data, size=cfg["M"], method="omp", key=key,
                            **cfg.get("coreset_options", {}), **candidates)
        elif name == "ours_options":  # the options of issue 36, not the defaults
            n = int(X.shape[0])
            pi_hat = None
            if n > OPTIONS_SUBSAMPLE:
                pi_hat = cj.laplace(model, data, key=jax.random.fold_in(key, 7), subsample=OPTIONS_SUBSAMPLE)
            cs = cj.coreset(model, data, size=cfg["M"], method="omp", key=key, pi_hat=pi_hat,
                            num_features=OPTIONS_FEATURES(int(X.shape[1])))
        else:
            cs = cj.coreset(model, data, key=key, tol=cfg["tol"], **cfg.get("coreset_options", {}), **candidates)
        jax.block_until_ready(cs.weights)
        info["coreset_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        if name == "ours_auto_draws":  # the search's own draws of the coreset it returns
            post = type("Draws", (), {"samples": cs.info["samples"]})()
        else:
            post = cj.sample(model, data, key, weights=cs, num_samples=draws, num_warmup=warmup,
                             num_chains=CHAINS, warn=False)
        jax.block_until_ready(post.samples)
        info["sample_s"] = time.perf_counter() - t1
        if not name.startswith("ours_auto"):
            t1 = time.perf_counter()
            cert = cj.certify(model, data, cs, post.samples)
            info["certify_s"] = time.perf_counter() - t1
        else:
            cert = cs.certificate
            info["sizes_tried"] = [int(p["size"]) for p in cs.info.get("path", [])]
        info.update(M=int(cs.weights.shape[0]), points=int(cs.num_points), kl=float(cert.kl),
                    kl_se=float(getattr(cert, "kl_se", np.nan)), khat=float(cert.khat), verdict=str(cert.verdict),
                    relative_error=float(cs.info.get("relative_error", np.nan)))
        out = np.asarray(post.samples)
    else:
        raise ValueError(f"unknown contender {name!r}")
    jax.block_until_ready(jnp.asarray(out))
    return np.asarray(out, np.float64), info, time.perf_counter() - t0


def child_main(argv=None) -> None:
    """Entry of a fresh process: argv = [config JSON]. Prints one line 'JSON{...}'; draws go to cfg['draws_path'].

    cfg['contender'] is one name, or (quick mode) a list run one after another in this process, each then
    with the programs of those before it compiled; the output then has one entry per contender in 'each'."""
    import logging
    import warnings

    t_start = time.perf_counter()
    cfg = json.loads((argv or sys.argv[1:])[0])
    import jax
    if cfg.get("fast_compile"):
        jax.config.update("jax_disable_most_optimizations", True)
    import numpyro  # noqa: F401
    import coresets_jax  # noqa: F401
    from cold_start import LOG  # the compile-log helpers of the cold-start benchmark
    scope: dict = {}
    exec(LOG + MODEL_CODE, scope)
    out = {"import_s": time.perf_counter() - t_start, "cache_dir": jax.config.jax_compilation_cache_dir}
    t = time.perf_counter()
    X, y, _ = make_data(cfg["kind"], cfg["D"], cfg["N"])
    X, y = jax.device_put(X), jax.device_put(y)
    jax.block_until_ready((X, y))
    out["data_s"] = time.perf_counter() - t
    fn = scope[cfg["kind"]]
    key = jax.random.key(cfg.get("seed", 0))
    warnings.simplefilter("ignore")
    names = cfg["contender"] if isinstance(cfg["contender"], list) else [cfg["contender"]]
    each = {}
    for name in names:
        calls = []
        for call in range(2 if cfg.get("warm", True) else 1):
            scope["start_log"]()
            logging.getLogger("jax._src.interpreters.pxla").disabled = True  # "Compiling ..." lines
            draws, info, seconds = run_contender(name, fn, X, y, key, cfg)
            calls.append({"seconds": seconds, "info": info, "log": scope["compile_log"]()})
            if call == 0:
                np.save(cfg["draws_path"] + f".{name}.npy", draws)
                if seconds > cfg.get("warm_max", np.inf):
                    break
        each[name] = calls
    out["each"] = each
    out["peak_rss_mb"] = common.peak_rss_mb()
    out["process_s"] = time.perf_counter() - t_start
    print("JSON" + json.dumps(common.jsonable(out)), flush=True)


def run_child(cfg: dict, work: str, timeout: float) -> dict:
    """`cfg`'s contender(s) in a fresh process with empty caches: {name: run} with per run 'calls', 'draws'
    (NumPy) or 'error'."""
    names = cfg["contender"] if isinstance(cfg["contender"], list) else [cfg["contender"]]
    cache = tempfile.mkdtemp(prefix="jaxcache_", dir=work)
    path = os.path.join(work, f"draws_{os.getpid()}_{time.time_ns()}")
    cfg = dict(cfg, draws_path=path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")}
    env.update(JAX_COMPILATION_CACHE_DIR=cache, CORESETS_JAX_NO_CACHE="1", CORESETS_JAX_PROGRESS="0",
               XDG_CACHE_HOME=cache)
    t = time.perf_counter()
    try:
        res = common.child("import vs_peers; vs_peers.child_main()", json.dumps(cfg), env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        res = {"error": f"its process did not finish within {timeout:.0f} s"}
    except Exception as err:  # a crash or memory exhaustion: recorded, the grid goes on
        res = {"error": f"{type(err).__name__}: {err}"[:500]}
    wall = time.perf_counter() - t
    shutil.rmtree(cache, ignore_errors=True)
    runs = {}
    for name in names:
        if "error" in res:
            runs[name] = {"error": res["error"], "wall_s": wall}
            continue
        runs[name] = {"calls": res["each"][name], "import_s": res["import_s"], "data_s": res["data_s"],
                      "peak_rss_mb": res["peak_rss_mb"], "wall_s": wall,
                      "draws": np.load(path + f".{name}.npy")}
        os.remove(path + f".{name}.npy")
    return runs


# ----------------------------------------------------------------------------------------------------
# Scores.


def thin(draws: np.ndarray, num: int) -> np.ndarray:
    flat = draws.reshape(-1, draws.shape[-1])
    return flat[np.linspace(0, len(flat) - 1, min(num, len(flat))).astype(int)]


def reference_from(draws: np.ndarray, label: str) -> dict:
    """Pooled mean and sd of a (2, S, D) full-data run, its chain-against-chain max |z| and W1 floor."""
    import coresets_jax as cj

    a, b = draws[0], draws[1]
    pooled = draws.reshape(-1, draws.shape[-1])
    mean, sd = pooled.mean(0), pooled.std(0)
    floor = float(cj.metrics.wasserstein1(thin(a, DRAWS), thin(b, DRAWS)))
    return {"label": label, "mean": mean, "sd": sd, "a": thin(a, DRAWS), "floor": floor,
            "chain_z": float(np.max(np.abs(a.mean(0) - b.mean(0)) / sd))}


def score(draws: np.ndarray, ref: dict) -> dict:
    import coresets_jax as cj

    flat = draws.reshape(-1, draws.shape[-1])
    z = (flat.mean(0) - ref["mean"]) / ref["sd"]
    w1 = float(cj.metrics.wasserstein1(ref["a"], thin(draws, DRAWS)))
    return {"max_z": float(np.max(np.abs(z))), "w1_floor": w1 / ref["floor"], "sd_ratio_max":
            float(np.max(np.abs(np.log(flat.std(0) / ref["sd"]))))}


# ----------------------------------------------------------------------------------------------------
# The parent: the grid.


def _skip_reason(contender: str, n: int, d: int, m: int, history: dict, budget: float,
                 v_limit: float = V_MEMORY_LIMIT) -> Optional[str]:
    """Why `contender` is not run at N (None: run it): a projected time over `budget` from its last cell
    (linear in N), or V over `v_limit` bytes."""
    from coresets_jax.features.projection import auto_num_features

    num_features = auto_num_features(d, m, n)  # cj.coreset's default for OMP
    if contender == "ours_options":
        num_features = OPTIONS_FEATURES(d)
    if contender.startswith("ours") and n * num_features * 4 > v_limit:
        return f"memory: V would take {n * num_features * 4 / 2**30:.1f} GiB (N x J = {n} x {num_features} float32)"
    last = history.get(contender)
    if last is not None:
        n0, s0, c0 = last
        if s0 is None:
            return f"failed or skipped at N = {n0}"
        projected = c0 + (s0 - c0) * n / n0  # compilation as before, the rest linear in N
        if projected > budget:
            return (f"time: {s0:.0f} s at N = {n0} ({c0:.0f} s compiling), projected {projected:.0f} s > budget "
                    f"{budget:.0f} s")
    return None


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
        p.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
        p.add_argument("--contenders", nargs="+", default=None,
                       help=f"default: all {list(CONTENDERS)}; with --quick {list(QUICK_CONTENDERS)}")
        p.add_argument("--M", type=int, default=None, help=f"coreset size of ours_fixed (default {MULT_M} D)")
        p.add_argument("--repeats", type=int, default=1)
        p.add_argument("--budget", type=float, default=600.0, help="seconds per contender and cell")
        p.add_argument("--warm-max", type=float, default=150.0, help="no warm call after a first call this long")
        p.add_argument("--tag", default="")
        p.add_argument("--v-memory-gib", type=float, default=V_MEMORY_LIMIT / 2**30,
                       help="skip our route where V (N x J float32) would exceed this (default: this shared machine's)")
        p.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                       help="combine the cells of these result files (runs of model/size subsets) into one")
        p.add_argument("--no-long-reference", action="store_true",
                       help="leave a cell whose full NUTS failed unscored instead of running the long HMCECS "
                            "reference (a short run on a lent machine)")
        p.add_argument("--chain-method-check", action="store_true",
                       help="also run NumPyro NUTS with chain_method='sequential' (to choose CHAIN_METHOD)")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    if args.tag and not args.tag.startswith(("_", "-")):
        args.tag = "_" + args.tag  # --tag gpu writes vs_peers_gpu.json
    if args.merge:
        return merge(args)
    work = tempfile.mkdtemp(prefix="vs_peers_")
    t_start = time.perf_counter()
    if args.quick:
        models, sizes, M = QUICK["models"], QUICK["sizes"], QUICK["M"]
        base = {"warmup": QUICK["warmup"], "draws": QUICK["draws"], "sgld_steps": QUICK["sgld_steps"],
                "hmcecs": QUICK["hmcecs"], "tol": 0.5, "fast_compile": True}
    else:
        models, sizes, M = {m: MODELS[m] for m in args.models}, args.sizes, args.M
        base = {"warmup": WARMUP, "draws": DRAWS, "sgld_steps": SGLD_STEPS, "hmcecs": HMCECS, "tol": TOL}
    contenders = list(args.contenders or (QUICK_CONTENDERS if args.quick else CONTENDERS)) + (["nuts_sequential"] if args.chain_method_check else [])
    result = {"quick": bool(args.quick), "command": "python benchmarks/vs_peers.py " + " ".join(sys.argv[1:]),
              "settings": {"chains": CHAINS, "warmup": base["warmup"], "draws": base["draws"],
                           "chain_method": CHAIN_METHOD, "hmcecs": base["hmcecs"], "sgld_steps": base["sgld_steps"],
                           "M": M or f"{MULT_M} D", "tol": base["tol"], "budget_s": args.budget, "warm_max_s": args.warm_max,
                           "repeats": args.repeats},
              "cells": [], "environment": common.environment(), "load_average_before": list(os.getloadavg())}
    stem = common.stem("vs_peers" + args.tag, args.quick)
    for label, (kind, d) in models.items():
        history: dict = {}
        for n in sizes:
            cell = {"model": label, "kind": kind, "D": d, "N": n, "runs": {}, "skipped": {}}
            todo = []
            for c in contenders:
                why = _skip_reason(c, n, d, min(M or MULT_M * d, n), history, args.budget, args.v_memory_gib * 2**30)
                if why:
                    cell["skipped"][c] = why
                else:
                    todo.append(c)
            for rep in range(args.repeats):
                k = (rep + len(result["cells"])) % max(len(todo), 1)  # a rotating order across cells and repeats
                order = todo[k:] + todo[:k]
                groups = [order] if args.quick else [[c] for c in order]  # quick: one process for all
                for group in groups:
                    cfg = dict(base, contender=group if args.quick else group[0], kind=kind, D=d, N=n,
                               M=min(M or MULT_M * d, n),
                               warm_max=args.warm_max, seed=rep, warm=not args.quick)
                    for c, res in run_child(cfg, work, timeout=max(3 * args.budget, 120)).items():
                        cell["runs"].setdefault(c, []).append(res)
                        _say(label, n, c, rep, res)
            for c in todo:
                ok = [r["calls"][0] for r in cell["runs"][c] if "error" not in r]
                history[c] = (n, float(np.median([k["seconds"] for k in ok])) if ok else None,
                              float(np.median([k["log"]["compile_s"] for k in ok])) if ok else 0.0)
            _score_cell(cell, work, base, args.budget, long_reference=not args.no_long_reference)
            result["cells"].append(cell)
            result["total_s"] = time.perf_counter() - t_start
            _write(result, args.out, stem)
    shutil.rmtree(work, ignore_errors=True)
    result["load_average_after"] = list(os.getloadavg())
    _write(result, args.out, stem, show=True)
    return result


def merge(args) -> dict:
    """One result from several runs' files: their cells in file order (a later file's cell replaces an
    earlier one's for the same model and N), each run's settings, commit and load kept under 'parts'."""
    cells, parts = {}, []
    for path in args.merge:
        with open(path) as f:
            part = json.load(f)
        for cell in part["cells"]:
            cell.setdefault("part", os.path.basename(path))
            cells[(cell["model"], cell["N"])] = cell
        parts.append({"file": os.path.basename(path), "command": part.get("command"), "settings": part["settings"],
                      "environment": part["environment"], "total_s": part.get("total_s"),
                      "load_average_before": part.get("load_average_before"),
                      "load_average_after": part.get("load_average_after")})
    order = {m: i for i, m in enumerate(MODELS)}
    # The parts' own machine when they share one (runs fetched from a lent GPU are merged on the CPU)
    machines = {(p["environment"].get("backend"), p["environment"].get("device_kind")) for p in parts}
    environment = dict(parts[-1]["environment"]) if len(machines) == 1 else common.environment()
    result = {"quick": False, "command": "python benchmarks/vs_peers.py --merge " + " ".join(args.merge),
              "settings": parts[-1]["settings"], "parts": parts,
              "cells": sorted(cells.values(), key=lambda c: (order.get(c["model"], 99), c["N"])),
              "environment": environment}
    _write(result, args.out, "vs_peers" + args.tag, show=True)
    return result


def _say(label, n, c, rep, res):
    if "error" in res:
        print(f"[{label} N={n} rep {rep}] {c:<16} ERROR {res['error'][:200]}", flush=True)
        return
    calls = res["calls"]
    warm = f"{calls[1]['seconds']:.1f}" if len(calls) > 1 else "-"
    print(f"[{label} N={n} rep {rep}] {c:<16} cold {calls[0]['seconds']:.1f} s  warm {warm} s  "
          f"(compile {calls[0]['log']['compile_s']:.1f} s, import {res['import_s']:.1f} s)  "
          + json.dumps({k: v for k, v in calls[0]["info"].items() if k != "map"}), flush=True)


def _score_cell(cell: dict, work: str, base: dict, budget: float, long_reference: bool = True) -> None:
    """Scores against full NUTS of the cell, else a long HMCECS run (run here, once per cell; with
    `long_reference` False the cell stays unscored)."""
    runs = cell["runs"]
    label = next((c for c in FULL_NUTS if any("error" not in r for r in runs.get(c, []))), None)
    if label:
        ref = reference_from([r for r in runs[label] if "error" not in r][0]["draws"], label)
    elif not long_reference:
        cell["reference"] = None
        cell["reference_note"] = "full NUTS did not finish and the long HMCECS reference was not run"
        for rs in runs.values():
            for r in rs:
                r.pop("draws", None)
        return
    else:
        cfg = dict(base, contender="hmcecs_long", kind=cell["kind"], D=cell["D"], N=cell["N"], warm=False, seed=99)
        res = run_child(cfg, work, timeout=max(3 * budget, 120))["hmcecs_long"]
        cell["reference_run"] = {k: v for k, v in res.items() if k != "draws"}
        if "error" in res:
            cell["reference"] = None
            for rs in runs.values():
                for r in rs:
                    r.pop("draws", None)
            return
        ref = reference_from(res["draws"], "hmcecs_long")
    cell["reference"] = {"label": ref["label"], "chain_z": ref["chain_z"], "floor": ref["floor"],
                         "mean": ref["mean"], "sd": ref["sd"]}
    for c, rs in runs.items():
        for i, r in enumerate(rs):
            if "draws" not in r:
                continue
            if c == ref["label"] and i == 0:
                r["score"] = {"max_z": ref["chain_z"], "w1_floor": 1.0, "sd_ratio_max": 0.0,
                              "note": "chain against chain"}
            else:
                r["score"] = score(r["draws"], ref)
            del r["draws"]


def summary(cell: dict) -> dict:
    """Per contender: medians of cold and warm seconds and of the scores."""
    out = {}
    for c, rs in cell["runs"].items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            err = rs[0].get("error", "")
            if err.startswith("TimeoutExpired"):  # files written before the message above existed
                err = f"its process did not finish within {rs[0].get('wall_s', float('nan')):.0f} s"
            out[c] = {"error": err}
            continue
        med = lambda xs: float(np.median(xs)) if xs else None  # noqa: E731
        entry = {"cold_s": med([r["calls"][0]["seconds"] for r in ok]),
                 "warm_s": med([r["calls"][1]["seconds"] for r in ok if len(r["calls"]) > 1]),
                 "compile_s": med([r["calls"][0]["log"]["compile_s"] for r in ok]),
                 "import_s": med([r["import_s"] for r in ok]),
                 "peak_rss_mb": med([r["peak_rss_mb"] for r in ok])}
        for k in ("max_z", "w1_floor"):
            vals = [r["score"][k] for r in ok if "score" in r]
            entry[k] = med(vals)
        info = ok[0]["calls"][0]["info"]
        for k in ("coreset_s", "sample_s", "certify_s", "points", "kl", "khat", "verdict", "M", "sizes_tried",
                  "mean_leapfrog_steps", "max_leapfrog_steps"):
            if k in info:
                entry[k] = info[k]
        out[c] = entry
    return out


def _full_nuts(s: dict) -> dict:
    """A cell summary's full-data NUTS entry: NumPyro's defaults, else the run with the data as arguments."""
    return next((s[c] for c in FULL_NUTS if s.get(c, {}).get("cold_s")), {})


def targets(result: dict) -> list:
    """Issue 36's done-when targets, per logistic D = 10 cell at N = 5e5 and 1e6."""
    rows = []
    for cell in result["cells"]:
        if cell["model"] != "logistic10" or cell["N"] not in (500_000, 1_000_000):
            continue
        s = summary(cell)
        ours, nuts, ecs = s.get("ours_fixed", {}), _full_nuts(s), s.get("hmcecs", {})
        if "cold_s" not in ours:
            continue
        row = {"N": cell["N"], "ours_cold_s": ours["cold_s"]}
        if nuts.get("cold_s"):
            row["over_nuts"] = ours["cold_s"] / nuts["cold_s"]
            row["over_nuts_target"] = 0.1 if cell["N"] < 1_000_000 else 0.05
            row["over_nuts_met"] = row["over_nuts"] <= row["over_nuts_target"]
        if ecs.get("cold_s"):
            row["over_hmcecs"] = ours["cold_s"] / ecs["cold_s"]
            row["over_hmcecs_met"] = row["over_hmcecs"] <= 0.25
        if cell.get("reference") and ours.get("max_z") is not None:
            row["max_z"], row["chain_z"] = ours["max_z"], cell["reference"]["chain_z"]
            row["z_met"] = ours["max_z"] <= 2 * cell["reference"]["chain_z"]
        rows.append(row)
    return rows


def break_even(result: dict) -> dict:
    """Per model: the largest N at which full NUTS (cold) was at least as fast as ours_fixed (cold), and the
    N where the two time curves cross (log-log interpolation), if they do within the grid."""
    out = {}
    for label in dict.fromkeys(c["model"] for c in result["cells"]):
        pts = []
        for cell in result["cells"]:
            if cell["model"] != label:
                continue
            s = summary(cell)
            a, b = _full_nuts(s).get("cold_s"), s.get("ours_fixed", {}).get("cold_s")
            if a and b:
                pts.append((cell["N"], a, b))
        cross = None
        for (n0, a0, b0), (n1, a1, b1) in zip(pts, pts[1:]):
            r0, r1 = np.log(a0 / b0), np.log(a1 / b1)
            if r0 <= 0 < r1:
                t = -r0 / (r1 - r0)
                cross = float(np.exp(np.log(n0) + t * (np.log(n1) - np.log(n0))))
        first = pts[0] if pts else None
        out[label] = {"points": [{"N": n, "nuts_cold_s": a, "ours_cold_s": b} for n, a, b in pts],
                      "crossing_N": cross,
                      "ours_faster_everywhere": bool(pts) and all(b < a for _, a, b in pts),
                      "note": (f"ours faster from the smallest N measured ({first[0]})" if pts and cross is None
                               and all(b < a for _, a, b in pts) else None)}
    return out


def markdown(result: dict) -> str:
    lines = ["| model | N | contender | cold s | warm s | compile s | max abs z | W1/floor | reference | notes |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda x, p=1: "-" if x is None else f"{x:.{p}f}"  # noqa: E731
    for cell in result["cells"]:
        s = summary(cell)
        ref = cell.get("reference") or {}
        for c, e in s.items():
            if "error" in e:
                lines.append(f"| {cell['model']} | {cell['N']:.0e} | {c} | error | | | | | | {e['error'][:80]} |")
                continue
            note = ""
            if c.startswith("ours"):
                note = (f"M {e.get('M')}, {e.get('points')} pts, KL {f(e.get('kl'), 4)}, k {f(e.get('khat'), 2)}, "
                        f"{e.get('verdict')}; coreset {f(e.get('coreset_s'))} s, sample {f(e.get('sample_s'))} s"
                        + (f", certify {f(e.get('certify_s'))} s" if e.get("certify_s") is not None else ""))
            elif e.get("mean_leapfrog_steps") is not None:
                note = f"leapfrog steps per draw {f(e['mean_leapfrog_steps'])} (max {e.get('max_leapfrog_steps')})"
            lines.append(f"| {cell['model']} | {cell['N']:.0e} | {c} | {f(e['cold_s'])} | {f(e['warm_s'])} | "
                         f"{f(e['compile_s'])} | {f(e['max_z'], 3)} | {f(e['w1_floor'], 2)} | "
                         + (f"{ref['label']} (chain z {f(ref.get('chain_z'), 3)})" if ref else "none") + f" | {note} |")
        for c, why in cell["skipped"].items():
            lines.append(f"| {cell['model']} | {cell['N']:.0e} | {c} | skipped | | | | | | {why} |")
    return "\n".join(lines)


def _write(result: dict, out_dir: str, stem: str, show: bool = False) -> None:
    result["summary"] = [{"model": c["model"], "N": c["N"], "contenders": summary(c), "skipped": c["skipped"],
                          "reference": c.get("reference")} for c in result["cells"]]
    result["targets"] = targets(result)
    result["break_even"] = break_even(result)
    result["table_markdown"] = markdown(result)
    path = common.write_json(result, out_dir, stem)
    _plot(result, out_dir, stem)
    if show:
        print(result["table_markdown"])
        print(json.dumps(common.jsonable({"targets": result["targets"], "break_even": result["break_even"]}),
                         indent=1))
        print("wrote", path)


def _plot(result: dict, out_dir: str, stem: str) -> None:
    labels = list(dict.fromkeys(c["model"] for c in result["cells"])) or ["-"]
    fig, axes = common.figure(1, len(labels), size=(5.5, 4.2))
    colors = {"nuts": "k", "nuts_jit_args": "tab:brown", "hmcecs": "tab:orange", "sgld": "tab:green",
              "ours_fixed": "tab:blue", "ours_auto": "tab:purple", "ours_auto_draws": "tab:olive",
              "ours_options": "tab:cyan", "nuts_sequential": "tab:gray", "ours_candidates": "tab:red",
              "ours_auto_candidates": "tab:pink"}
    for ax, label in zip(axes[0], labels):
        cells = [c for c in result["cells"] if c["model"] == label]
        for c in colors:
            pts = [(cell["N"], summary(cell)[c]) for cell in cells if c in summary(cell)
                   and summary(cell)[c].get("cold_s")]
            if not pts:
                continue
            ns = [n for n, _ in pts]
            ax.plot(ns, [e["cold_s"] for _, e in pts], "-o", color=colors[c], label=f"{c} (cold)")
            warm = [(n, e["warm_s"]) for n, e in pts if e.get("warm_s")]
            if warm:
                ax.plot(*zip(*warm), ":", color=colors[c], alpha=0.6)
            for n, e in pts:
                if e.get("max_z") is not None:
                    ax.annotate(f"z{e['max_z']:.2f}", (n, e["cold_s"]), fontsize=7, color=colors[c],
                                xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (rows)")
        ax.set_ylabel("seconds from a fresh process (solid: first call; dotted: warm)")
        ax.set_title(f"{label}: time to a posterior (z = max |z| of the mean)", fontsize=9)
        ax.legend(fontsize=7)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
