"""coresets-jax: build Bayesian coresets from the command line.

  coresets-jax run [CONFIG.yaml] [--out DIR] [--quiet] [--sample]   the main job (no config: built-in data)
  coresets-jax bench NAME [--quick]                                 run benchmarks/NAME.py
  coresets-jax info                                                 versions, devices, methods

With no config, `run` does HC §7.2's synthetic logistic regression (N = 10,000, theta = [3, 3, 0]): Laplace
pi_hat, Fisher projection with J = 500, and Frank–Wolfe coresets for M in {10, 100, 1000} against uniform
subsampling. The whole config is checked before any work; every mistake ends in one line on stderr and exit
status 2.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Optional

EXIT_USAGE = 2

# --------------------------------------------------------------------------------------------------------
# The config schema: every key, its check, its default. Nested mappings are schemas themselves.


class ConfigError(ValueError):
    """A mistake in the config or the command line: reported as one line, exit status 2."""


def _methods() -> tuple:
    """Every registered construction (vector solvers and posterior-driven methods)."""
    from .registry import methods
    return tuple(methods())


def _positive_int(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: expected a positive integer, got {value!r}")
    return value


def _non_negative_int(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: expected an integer >= 0, got {value!r}")
    return value


def _int(value, where):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    return value


def _bool(value, where):
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _positive_float(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}: expected a positive number, got {value!r}")
    return float(value)


def _choice(options: Callable[[], tuple] | tuple):
    def check(value, where):
        allowed = options() if callable(options) else options
        if value not in allowed:
            raise ConfigError(f"{where}: {value!r} is not allowed; allowed values: {', '.join(allowed)}")
        return value
    return check


def _list_of(check_item, what: str):
    def check(value, where):
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{where}: expected a non-empty list of {what}, got {value!r}")
        return [check_item(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return check


def _string(value, where):
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _options(value, where):
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping from method name to its options, e.g. "
                          f"{{frank_wolfe: {{step_rule: fixed}}}}, got {value!r}")
    for method, opts in value.items():
        _choice(_methods)(method, f"{where} key")
        if not isinstance(opts, dict):
            raise ConfigError(f"{where}.{method}: expected a mapping of options, got {opts!r}")
        for name, option in opts.items():
            if not isinstance(option, (bool, int, float, str)):
                raise ConfigError(f"{where}.{method}.{name}: options must be numbers, booleans or strings, "
                                  f"got {option!r}")
    return value


MODELS = ("logistic_regression", "poisson_regression")
SYNTHETIC = ("logistic", "poisson")
NORMS = ("fisher", "l2", "centered")
SAMPLERS = ("nuts", "hmc", "mala", "rwmh")

# key: (check, default, help). A dict default with a dict check is a nested schema.
DATA_SCHEMA: dict = {
    "synthetic": (_choice(SYNTHETIC), "logistic", "built-in generator (HC §7.2); or give path"),
    "n": (_positive_int, 10_000, "rows of synthetic data"),
    "seed": (_int, 0, "seed of the synthetic data"),
    "path": (_string, None, ".npz file with keys X, y (relative to the config's folder)"),
}
SAMPLE_SCHEMA: dict = {
    "method": (_choice(SAMPLERS), "nuts", "MCMC kernel"),
    "num_samples": (_positive_int, 500, "draws per chain"),
    "num_warmup": (_positive_int, 500, "adaptation steps per chain"),
}
SCHEMA: dict = {
    "model": (_choice(MODELS), "logistic_regression", "built-in model"),
    "prior_scale": (_positive_float, 1.0, "prior N(0, s^2 I)"),
    "data": (DATA_SCHEMA, None, "the data"),
    "norm": (_choice(NORMS), "fisher", "projection norm"),
    "num_features": (_positive_int, 500, "J, the projection dimension"),
    "methods": (_list_of(_choice(_methods), "method names"), None, "construction methods to compare"),
    "method": (_choice(_methods), "frank_wolfe", "the method (when methods is not given)"),
    "baseline": (_choice(_methods), "uniform", "the baseline (when methods is not given)"),
    "options": (_options, {}, "per-method options"),
    "sizes": (_list_of(_positive_int, "positive integers"), [10, 100, 1000], "coreset sizes M"),
    "repeats": (_non_negative_int, 3, "timed calls after the first"),
    "seed": (_int, 0, "seed of the whole job"),
    "certify": (_bool, True, "certify each coreset (cj.certify) from one MCMC chain on it"),
    "sample": (SAMPLE_SCHEMA, None, "MCMC settings of the certificate's chains and of --sample"),
}


def _check_mapping(user: Any, schema: dict, where: str) -> dict:
    if not isinstance(user, dict):
        raise ConfigError(f"{where}: expected a mapping of keys ({', '.join(schema)}), got {user!r}")
    unknown = [k for k in user if k not in schema]
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key; allowed keys: {', '.join(schema)}")
    out = {}
    for key, (check, default, _) in schema.items():
        value = user.get(key, None)
        if isinstance(check, dict):
            out[key] = _check_mapping(value if key in user else {}, check, f"{where}.{key}")
        elif key in user:
            out[key] = check(value, f"{where}.{key}")
        else:
            out[key] = copy.deepcopy(default)
    return out


def validate_config(user: Any, base: str) -> dict:
    """The full config (defaults filled in) from a user mapping; raises ConfigError naming the key."""
    config = _check_mapping(user if user is not None else {}, SCHEMA, "config")
    data, given = config["data"], (user or {}).get("data", {}) or {}
    if "path" in given and "synthetic" in given:
        raise ConfigError("config.data: give either path (an .npz file) or synthetic (logistic | poisson), "
                          "not both")
    if "path" in given:
        extra = [k for k in ("n", "seed") if k in given]
        if extra:
            raise ConfigError(f"config.data.{extra[0]}: applies to synthetic data only, not to data.path")
        path = data["path"] if os.path.isabs(data["path"]) else os.path.normpath(os.path.join(base, data["path"]))
        if not os.path.isfile(path):
            raise ConfigError(f"config.data.path: no file at {path} (relative paths resolve against the "
                              f"config's folder {base}); put the .npz (keys X, y) there (see the comments "
                              f"at the top of the config), or use data: {{synthetic: "
                              f"{'poisson' if config['model'] == 'poisson_regression' else 'logistic'}}}")
        data["path"] = path
        data.pop("synthetic")
    else:
        data.pop("path")
    user_keys = set(user or {})
    if "methods" in user_keys and user_keys & {"method", "baseline"}:
        raise ConfigError("config.methods: give either methods (a list) or method/baseline, not both")
    if config["methods"] is None:
        config["methods"] = list(dict.fromkeys([config["method"], config["baseline"]]))
    config.pop("method")
    config.pop("baseline")
    for method, opts in config["options"].items():
        if method not in config["methods"]:
            raise ConfigError(f"config.options.{method}: {method!r} is not in methods {config['methods']}")
        _check_method_options(method, opts, f"config.options.{method}")
    if "synthetic" in data:
        for i, m in enumerate(config["sizes"]):
            if m > data["n"]:
                raise ConfigError(f"config.sizes[{i}]: M = {m} exceeds the number of rows n = {data['n']}")
    return config


def _check_method_options(method: str, opts: dict, where: str) -> None:
    from .registry import resolve

    construction = resolve(method)
    allowed = list(construction.options)
    if construction.needs == "vectors":
        allowed += ["refit", "compress", "compress_tol"]  # `cj.build`'s own options
    for name in opts:
        if name not in allowed:
            raise ConfigError(f"{where}.{name}: not an option of {method}; allowed options: {', '.join(allowed)}")


def load_config(path: Optional[str]) -> dict:
    """Read and validate a YAML config (None: the defaults)."""
    import yaml

    if path is None:
        return validate_config({}, os.getcwd())
    if os.path.isdir(path):
        raise ConfigError(f"config: {path!r} is a directory; give a YAML file, e.g. configs/default.yaml")
    if not os.path.exists(path):
        raise ConfigError(f"config: no such file {path!r}")
    try:
        with open(path) as f:
            user = yaml.safe_load(f)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"config: {path!r} is not valid YAML{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"config: cannot read {path!r}: {err}") from None
    if user is None:
        user = {}
    if not isinstance(user, dict):
        raise ConfigError(f"config: {path!r} must hold a mapping of keys ({', '.join(SCHEMA)}) at the top "
                          f"level, got {type(user).__name__}")
    return validate_config(user, os.path.dirname(os.path.abspath(path)))


def check_out(out: Optional[str]) -> None:
    """--out must be a folder we can write (created if missing); checked before any work."""
    if out is None:
        return
    if os.path.exists(out) and not os.path.isdir(out):
        raise ConfigError(f"--out: {out!r} exists and is not a folder; give a folder for results.json, "
                          "the saved coresets and the plots")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.exists(out) and not os.path.isdir(parent):
        raise ConfigError(f"--out: the parent folder {parent!r} does not exist")
    target = out if os.path.exists(out) else parent
    if not os.access(target, os.W_OK):
        raise ConfigError(f"--out: {target!r} is not writable")


# --------------------------------------------------------------------------------------------------------
# The job.


_quiet = {"on": False}


def _log(msg: str) -> None:
    if not _quiet["on"]:
        print(msg, file=sys.stderr, flush=True)


def _construct(method: str, size: int, model, data, V, key, options: dict, approx=None):
    """One coreset by method name, as its registry entry declares: vector methods on V (`cj.build`),
    posterior-driven ones on the model (`cj.coreset`, started from the same pi_hat)."""
    from .construct import build, coreset
    from .registry import resolve

    if resolve(method).needs == "posterior":
        return coreset(model, data, size, method, key, pi_hat=approx, **options)
    return build(V, size, method, key, **options)


def _timed(fn, repeats: int):
    """(result, first-call seconds including compilation, median seconds of later calls or None)."""
    import jax

    start = time.perf_counter()
    result = fn()
    jax.block_until_ready(result.weights)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn().weights)
        times.append(time.perf_counter() - start)
    return result, first, (statistics.median(times) if times else None)


def _load_data(spec: dict):
    import jax

    from .data import load_npz, synthetic_logistic, synthetic_poisson

    if "path" in spec:
        return load_npz(spec["path"])
    make = {"logistic": synthetic_logistic, "poisson": synthetic_poisson}[spec["synthetic"]]
    return make(jax.random.key(spec["seed"]), spec["n"])


def _weighted_laplace(model, data, cs, init):
    """Laplace fit of the coreset posterior pi_w (its rows, weighted): mean and covariance."""
    import jax
    import jax.numpy as jnp

    from .core.model import Model
    from .pihat import laplace

    rows = jax.tree_util.tree_map(lambda a: a[cs.indices], data)
    weighted = Model(log_likelihood=lambda th, d: jnp.where(d[1] > 0, d[1] * model.log_likelihood(th, d[0]),
                                                            0.0),
                     log_prior=model.log_prior, name=f"weighted_{model.name}")
    return laplace(weighted, (rows, cs.weights), init=init)


def run_job(config: dict, sample: bool = False, out: Optional[str] = None) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import progress
    from .construct import relative_error
    from .models import logistic_regression, poisson_regression
    from .pihat import laplace
    from .projection import project

    key_pi, key_theta, key_proj, key_solve, key_mcmc = jax.random.split(jax.random.key(config["seed"]), 5)
    model = {"logistic_regression": logistic_regression,
             "poisson_regression": poisson_regression}[config["model"]](prior_scale=config["prior_scale"])
    dataset = _load_data(config["data"])
    data = dataset.train
    X, y = data
    n = int(X.shape[0])
    for i, m in enumerate(config["sizes"]):
        if m > n:
            raise ConfigError(f"config.sizes[{i}]: M = {m} exceeds the number of data rows N = {n}")
    stages = {}
    _log(f"[1/3] Laplace approximation (pi_hat) on N = {n} rows, D = {X.shape[1]} ({config['model']})")
    start = time.perf_counter()
    approx = laplace(model, data, key=key_pi)
    stages["laplace_s"] = time.perf_counter() - start
    _log(f"[2/3] {config['norm']} projection to J = {config['num_features']} features")
    start = time.perf_counter()
    thetas = approx.sample(key_theta, config["num_features"])
    V = project(model, data, thetas, norm=config["norm"], key=key_proj)
    V.block_until_ready()
    stages["projection_s"] = time.perf_counter() - start
    rows, coresets = [], {}
    work = [(m, method) for m in config["sizes"] for method in config["methods"]]
    _log(f"[3/3] {len(work)} coresets: methods {', '.join(config['methods'])} at M = "
         f"{', '.join(map(str, config['sizes']))}")
    for m, method in progress.bar(work, desc="coresets"):
        options = dict(config["options"].get(method, {}))
        cs, first, median = _timed(lambda: _construct(method, m, model, data, V, key_solve, options, approx),
                                   config["repeats"])
        coresets[(method, m)] = cs
        rows.append({"method": method, "size": m, "num_points": cs.num_points,
                     "time_s": median if median is not None else first, "first_call_s": first,
                     "time_is_first_call": median is None,
                     "relative_error": float(relative_error(V, cs)),
                     "indices": np.asarray(cs.indices).tolist(),
                     "weights": np.asarray(cs.weights).astype(float).tolist()})
    report = {
        "config": config,
        "n": n,
        "dim": int(X.shape[1]),
        "laplace_mean": [float(x) for x in approx.mean],
        "stages": stages,
        "results": rows,
        "environment": _environment(),
    }
    if sample or config["certify"]:
        key_chains, key_full = jax.random.split(key_mcmc)
        draws = _coreset_draws(config, model, data, coresets, key_chains)
        if config["certify"]:
            _certify_rows(model, data, coresets, draws, rows)
        if sample:
            report["sampling"] = _posterior_quality(config, model, data, draws, rows, key_full)
    if out is not None:
        report["files"] = _write_outputs(out, report, model, data, dataset, coresets, approx, config)
    return report


def _coreset_draws(config, model, data, coresets, key) -> dict:
    """One MCMC chain on each coreset (the `sample` settings): {(method, M): Posterior}."""
    import jax

    from .inference import sample

    settings = config["sample"]
    out = {}
    for (label, cs), k in zip(coresets.items(), jax.random.split(key, len(coresets))):
        method, m = label
        _log(f"[sample] {settings['method']} on the {method} coreset of size M = {m}")
        out[label] = sample(model, data, k, weights=cs, num_chains=1, method=settings["method"],
                            num_samples=settings["num_samples"], num_warmup=settings["num_warmup"], warn=False)
    return out


def _certify_rows(model, data, coresets, draws, rows) -> None:
    """k-hat and the KL estimate of each coreset (cj.certify) into its row; warns where k-hat > 0.7."""
    from .certification import certify

    for label, cs in coresets.items():
        cert = certify(model, data, cs, draws[label].samples)
        row = next(r for r in rows if (r["method"], r["size"]) == label)
        row.update(khat=cert.khat, kl_estimate=cert.kl, kl_se=cert.kl_se, verdict=cert.verdict,
                   certify_time_s=cert.time_s)
        if cert.verdict == "unreliable":  # printed even with --quiet: it is a result, not progress
            print(f"coresets-jax: warning: {label[0]} at M = {label[1]}: certificate unreliable (khat "
                  f"{cert.khat:.2f} > 0.7, KL estimate {cert.kl:.3g}): its posterior misses mass of the full-data "
                  "posterior; use a larger M or another method", file=sys.stderr)


def _posterior_quality(config, model, data, draws, rows, key) -> dict:
    """NUTS on the full data (two chains); W1 of each coreset's chain against the full data's second chain,
    divided by the noise floor W1(full chain 1, full chain 2) at the same number of draws."""
    import numpy as np

    from . import metrics
    from .inference import sample

    settings = config["sample"]
    common = dict(method=settings["method"], num_samples=settings["num_samples"],
                  num_warmup=settings["num_warmup"])
    _log(f"[sample] {settings['method']} on the full data (2 chains of {settings['num_samples']} draws)")
    full = sample(model, data, key, weights=None, num_chains=2, **common)
    chains = np.asarray(full.samples)
    floor = metrics.wasserstein1(chains[0], chains[1])
    out = {"settings": settings, "noise_floor_w1": floor, "full_time_s": full.wall_time,
           "full_mean": chains.reshape(-1, chains.shape[-1]).mean(0).tolist(), "draws": {"full": chains}}
    for (method, m), post in draws.items():
        chain = np.asarray(post.samples[0])
        w1 = metrics.wasserstein1(chain, chains[1])
        out["draws"][f"{method}, M={m}"] = chain
        row = next(r for r in rows if (r["method"], r["size"]) == (method, m))
        row.update(w1=w1, w1_over_floor=w1 / floor, sample_time_s=post.wall_time)
    return out


def _environment() -> dict:
    import jax

    from . import __version__
    return {"coresets_jax": __version__, "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "python": platform.python_version()}


def _write_outputs(out, report, model, data, dataset, coresets, approx, config) -> dict:
    import numpy as np

    from .io import save

    os.makedirs(os.path.join(out, "coresets"), exist_ok=True)
    files = {"coresets": []}
    for (method, m), cs in coresets.items():
        path = os.path.join(out, "coresets", f"{method}_M{m}.npz")
        save(cs, path, data=data, config_method=method, norm=config["norm"],
             num_features=config["num_features"], seed=config["seed"])
        files["coresets"].append(path)
    try:
        files["plots"] = _plots(out, report, model, data, dataset, coresets, approx, config)
    except ImportError as err:
        _log(f"note: no plots ({err})")
        files["plots"] = []
    sampling = report.get("sampling")
    json_report = dict(report, files=files)
    if sampling is not None:
        json_report["sampling"] = {k: v for k, v in sampling.items() if k != "draws"}
    path = os.path.join(out, "results.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(json_report, f, indent=1, default=lambda o: np.asarray(o).tolist())
    os.replace(tmp, path)
    files["results"] = path
    return files


def _plots(out, report, model, data, dataset, coresets, approx, config) -> list:
    import jax
    import numpy as np

    from . import plots

    written = []
    X, y = (np.asarray(a) for a in data)
    main, largest = config["methods"][0], max(config["sizes"])
    middle = sorted(config["sizes"])[len(config["sizes"]) // 2]
    cs = coresets[(main, middle)]
    path = os.path.join(out, "coreset_points.png")
    labels = y if config["model"] == "logistic_regression" else None
    plots.coreset_points(X, cs.indices, cs.weights, labels,
                         title=f"{main} coreset, M = {middle} ({cs.num_points} points)", path=path)
    written.append(path)
    path = os.path.join(out, "errors.png")
    plots.errors(report["results"], path=path,
                 title=f"{config['model']}, N = {report['n']}, {config['norm']} features, J = "
                       f"{config['num_features']}")
    written.append(path)
    names = [f"θ{i}" for i in range(X.shape[1])]
    sampling = report.get("sampling")
    path = os.path.join(out, "marginals.png")
    if sampling is not None:
        full = sampling["draws"]["full"]
        others = {k: v for k, v in sampling["draws"].items() if k != "full" and k.endswith(f"M={largest}")}
        plots.marginals(full, others, names=names, path=path,
                        title=f"posterior marginals ({config['sample']['method']}): full data against "
                              f"coresets of size M = {largest}")
    else:
        # Without --sample: Laplace approximations of each posterior, drawn from (cheap, labelled as such).
        key = jax.random.key(1)
        full = np.asarray(approx.sample(key, 4000))
        others = {}
        for method in config["methods"]:
            fit = _weighted_laplace(model, data, coresets[(method, largest)], approx.mean)
            others[f"{method}, M={largest}"] = np.asarray(fit.sample(key, 4000))
        plots.marginals(full, others, names=names, path=path,
                        title=f"Laplace approximations of the posteriors: full data against coresets of "
                              f"size M = {largest} (run with --sample for MCMC)")
    written.append(path)
    import matplotlib.pyplot as plt
    plt.close("all")
    return written


ERROR_NOTE = ("error = ||sum_n v_n - V^T w|| / ||sum_n v_n||, the relative error of the coreset's weighted "
              "sum of projected log-likelihoods (HC Eq. 3.2): 0 is exact, 1 is no better than the empty "
              "coreset.\n  With fisher/centered features the per-datum vectors nearly cancel near the mode, "
              "so sum v is short and errors above 1 are normal for small M; compare methods at equal M.")

CERTIFY_NOTE = ("khat, KL est. = cj.certify from one {method} chain of {num_samples} draws on each coreset and one "
                "pass over the data: PSIS k-hat (< 0.5 good, 0.5-0.7 usable, > 0.7 unreliable, marked !) and the "
                "estimate of KL(coreset posterior || full posterior) in nats; no full-data MCMC needed.")


def format_table(report: dict) -> str:
    sampled = any("w1_over_floor" in r for r in report["results"])
    certified = any("khat" in r for r in report["results"])
    head = (f"{'method':<14}{'M':>7}{'points':>8}{'time (s)':>11}{'1st call (s)':>14}{'error':>10}"
            + (f"{'khat':>7}{'KL est.':>10}" if certified else "") + (f"{'W1/floor':>10}" if sampled else ""))
    lines = [head]
    for r in report["results"]:
        median = "-" if r.get("time_is_first_call") else f"{r['time_s']:.4f}"
        line = (f"{r['method']:<14}{r['size']:>7}{r['num_points']:>8}{median:>11}"
                f"{r['first_call_s']:>14.3f}{r['relative_error']:>10.3g}")
        if certified:
            line += f"{r.get('khat', float('nan')):>7.2f}{r.get('kl_estimate', float('nan')):>10.3g}"
            line += "!" if r.get("verdict") == "unreliable" else " "
        if sampled:
            line += f"{r.get('w1_over_floor', float('nan')):>10.2f}"
        lines.append(line)
    s = report["stages"]
    lines.append(f"N = {report['n']}, D = {report['dim']}; Laplace {s['laplace_s']:.2f} s; projection "
                 f"{s['projection_s']:.2f} s")
    lines.append("time = median of repeated calls after compilation; 1st call = the first call, compilation "
                 "included (on a busy machine it can come out below the median)")
    lines.append(ERROR_NOTE)
    if certified:
        lines.append(CERTIFY_NOTE.format(**report["config"]["sample"]))
    if sampled:
        floor = report["sampling"]["noise_floor_w1"]
        lines.append(f"W1/floor = W1(coreset posterior, full posterior) / W1 between two full-data chains "
                     f"(= {floor:.3g}), {report['sampling']['settings']['method']} with "
                     f"{report['sampling']['settings']['num_samples']} draws each: about 1 is as good as the "
                     f"full data at this many draws.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# bench and info.


def _repo_benchmarks() -> Optional[str]:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = os.path.join(here, "benchmarks")
    return folder if os.path.isdir(folder) else None


def run_bench(name: str, quick: bool) -> int:
    folder = _repo_benchmarks()
    if folder is None:
        raise ConfigError("bench: no benchmarks/ folder beside the package; run from a clone of the repository")
    available = sorted(f[:-3] for f in os.listdir(folder)
                       if f.endswith(".py") and not f.startswith("_") and f != "numpy_reference.py")
    if name not in available:
        raise ConfigError(f"bench: unknown benchmark {name!r}; available: {', '.join(available)}")
    command = [sys.executable, os.path.join(folder, f"{name}.py")] + (["--quick"] if quick else [])
    _log("running " + " ".join(command))
    return subprocess.call(command, cwd=os.path.dirname(folder))


def info() -> str:
    import jax

    from .inference.sample import METHODS as SAMPLERS_
    from .projection import NORMS as NORMS_
    env = _environment()
    optional = []
    for package in ("numpyro", "arviz", "matplotlib", "tqdm"):
        try:
            module = __import__(package)
            optional.append(f"{package} {getattr(module, '__version__', '?')}")
        except ImportError:
            optional.append(f"{package} (not installed)")
    return "\n".join([
        f"coresets_jax {env['coresets_jax']}, jax {env['jax']}, python {env['python']}",
        f"backend: {env['backend']}; devices: {', '.join(env['devices'])}; x64: {jax.config.jax_enable_x64}",
        f"construction methods: {', '.join(_methods())}",
        f"projection norms: {', '.join(NORMS_)}",
        f"samplers: {', '.join(SAMPLERS_)}",
        f"optional packages: {', '.join(optional)}",
    ])


# --------------------------------------------------------------------------------------------------------
# The command line.


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2) that point at --help."""

    def error(self, message):
        raise ConfigError(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="coresets-jax", description=__doc__.split("\n\n")[0].splitlines()[0],
                     epilog="Run 'coresets-jax COMMAND --help' for each command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    run_p = sub.add_parser(
        "run", help="build and compare coresets (the main job)",
        description="Build coresets for each method and size in the config, print a table of time and "
                    "error, and with --out write results.json, the saved coresets and PNG plots. With no "
                    "config: HC §7.2 synthetic logistic regression, N = 10,000.",
        epilog="Config keys (see configs/default.yaml): " + ", ".join(SCHEMA) + ".")
    run_p.add_argument("config", nargs="?", metavar="CONFIG", help="YAML config (see configs/)")
    run_p.add_argument("--out", metavar="DIR", help="folder for results.json, coresets/*.npz and *.png")
    run_p.add_argument("--quiet", action="store_true", help="no progress bars or stage messages")
    run_p.add_argument("--sample", action="store_true",
                       help="also run MCMC on each coreset and the full data; adds the W1/floor column")
    bench_p = sub.add_parser("bench", help="run a benchmark script from benchmarks/",
                             description="Run benchmarks/NAME.py (its results go to benchmarks/results/).")
    bench_p.add_argument("name", metavar="NAME", help="benchmark name, e.g. solvers")
    bench_p.add_argument("--quick", action="store_true", help="the benchmark's small, fast variant")
    sub.add_parser("info", help="versions, devices and the available methods",
                   description="Print package versions, JAX devices and the available methods.")
    return parser


def main(argv: Optional[list] = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "info":
            print(info())
            return 0
        if args.command == "bench":
            return run_bench(args.name, args.quick)
        config = load_config(args.config)
        check_out(args.out)
        if args.quiet:
            from . import progress
            progress.enabled(False)
            _quiet["on"] = True
        report = run_job(config, sample=args.sample, out=args.out)
        print(format_table(report))
        if args.out:
            for path in [report["files"]["results"]] + report["files"]["plots"]:
                print(f"wrote {path}", file=sys.stderr)
        return 0
    except ConfigError as err:
        print(f"coresets-jax: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as err:  # bad input found by the library (e.g. a data file's contents)
        print(f"coresets-jax: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("coresets-jax: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug: one line, and the traceback on request
        if os.environ.get("CORESETS_JAX_DEBUG"):
            raise
        print(f"coresets-jax: internal error: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
              " (set CORESETS_JAX_DEBUG=1 for the traceback, and please report it)", file=sys.stderr)
        return 1
    finally:
        _quiet["on"] = False


if __name__ == "__main__":
    sys.exit(main())
