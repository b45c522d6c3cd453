"""The main job: pi_hat, projection, each coreset timed, its certificate, and with --sample full-data MCMC."""

from __future__ import annotations

import platform
import statistics
import sys
import time
from typing import Optional

from .config import MODELS, ConfigError
from .log import log as _log

__all__ = ["environment", "run_job"]

def _construct(method: str, size, model, data, V, key, options: dict, approx=None, config=None):
    """One coreset by method name, as its registry entry declares: vector methods on V (`cj.build`),
    posterior-driven ones on the model (`cj.coreset`, started from the same pi_hat); size "auto": the
    smallest certified coreset for the config's tol (`cj.coreset(tol=...)`, with the same pi_hat)."""
    from ..construct import build, coreset
    from ..registry import resolve

    if size == "auto":
        return coreset(model, data, None, method, key, pi_hat=approx, tol=config["tol"], norm=config["norm"],
                       num_features=config["num_features"], **options)
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
    """The Dataset of the config's data section; a mistake in a data file ends in one line naming the key."""
    import re

    import jax

    from ..data import load_file, synthetic_logistic, synthetic_poisson

    if "path" in spec:
        try:
            return load_file(spec["path"], label=spec["label"], intercept=spec["intercept"],
                             num_test=spec["num_test"], test_path=spec.get("test_path"))
        except ValueError as err:  # "path: ...", "test_path: ...", "num_test: ..." -> config.data.KEY: ...
            msg = str(err).splitlines()[0]
            named = re.match(r"^(path|test_path|num_test)(, (path|test_path|num_test))*: ", msg)
            raise ConfigError(("config.data." + msg) if named else f"config.data.path: {msg}") from None
    make = {"logistic": synthetic_logistic, "poisson": synthetic_poisson}[spec["synthetic"]]
    return make(jax.random.key(spec["seed"]), spec["n"], num_test=spec["num_test"])


def _user_model(config: dict):
    """A user's `model: package.module:function`, called: a cj.Model or a NumPyro model function. Runs before
    the data is loaded, so a function that fails or returns something else stops the job at once."""
    from .config import call_model, import_model

    spec = config["model"]
    return call_model(spec, import_model(spec), config["model_options"])


def _model_and_data(config: dict, made, dataset) -> tuple:
    """(model, data pytree, held-out data pytree or None) for the built-in and the user's models.

    Built-in and user cj.Models take data (X, y). A NumPyro model function goes through
    `cj.from_numpyro(fn, X, y)`: its data is the dict {fn's first argument: X, its second: y}."""
    from ..core.model import Model
    from ..models import logistic_regression, poisson_regression

    if config["model"] in MODELS:
        make = {"logistic_regression": logistic_regression, "poisson_regression": poisson_regression}
        return make[config["model"]](prior_scale=config["prior_scale"]), dataset.train, dataset.test
    if isinstance(made, Model):
        return made, dataset.train, dataset.test
    from ..interop.numpyro_bridge import from_numpyro

    def convert(X, y, which):
        try:
            return from_numpyro(made, X, y)
        except Exception as err:  # the user's model: one line, naming the key
            first = str(err).splitlines()[0] if str(err) else ""
            raise ConfigError(f"config.model: {config['model']!r} returned a function that "
                              f"cj.from_numpyro(fn, X, y) cannot use with the {which} rows: "
                              f"{type(err).__name__}: {first}") from None

    model, data = convert(dataset.X, dataset.y, "training")
    test = None if dataset.Xt is None else convert(dataset.Xt, dataset.yt, "held-out")[1]
    return model, data, test


def run_job(config: dict, sample: bool = False, out: Optional[str] = None) -> dict:
    import jax
    import numpy as np

    from .. import progress
    from ..construct import relative_error
    from ..weighting.pihat import laplace
    from ..features.projection import project

    key_pi, key_theta, key_proj, key_solve, key_mcmc = jax.random.split(jax.random.key(config["seed"]), 5)
    made = None if config["model"] in MODELS else _user_model(config)
    dataset = _load_data(config["data"])
    model, data, test_data = _model_and_data(config, made, dataset)
    X = dataset.X
    n = int(X.shape[0])
    for i, m in enumerate(config["sizes"]):
        if m != "auto" and m > n:
            raise ConfigError(f"config.sizes[{i}]: M = {m} exceeds the number of data rows N = {n}")
    stages = {}
    _log(f"[1/3] Laplace approximation (pi_hat) on N = {n} rows with {X.shape[1]} features ({config['model']})")
    start = time.perf_counter()
    approx = laplace(model, data, key=key_pi)
    stages["laplace_s"] = time.perf_counter() - start
    if config["num_features"] == "auto":  # one V for every fixed size: J for the largest of them
        from ..features.projection import auto_num_features
        fixed = [m for m in config["sizes"] if m != "auto"]
        config = dict(config, num_features=auto_num_features(int(approx.mean.shape[-1]),
                                                             max(fixed) if fixed else None, n))
    _log(f"[2/3] {config['norm']} projection to J = {config['num_features']} features")
    start = time.perf_counter()
    thetas = approx.sample(key_theta, config["num_features"])
    V = project(model, data, thetas, norm=config["norm"], key=key_proj)
    V.block_until_ready()
    stages["projection_s"] = time.perf_counter() - start
    rows, coresets = [], {}
    work = [(m, method) for m in config["sizes"] for method in config["methods"]]
    work += [("auto", method) for method in config["auto"] if ("auto", method) not in work]
    _log(f"[3/3] {len(work)} coresets: methods {', '.join(config['methods'])} at M = "
         f"{', '.join(map(str, config['sizes']))}"
         + (f"; {', '.join(config['auto'])} at the size the certificate chooses for KL <= {config['tol']} nats"
            if config["auto"] else ""))
    for m, method in progress.bar(work, desc="coresets"):
        options = dict(config["options"].get(method, {}))
        cs, first, median = _timed(lambda: _construct(method, m, model, data, V, key_solve, options, approx,
                                                      config), config["repeats"] if m != "auto" else 0)
        coresets[(method, m)] = cs
        if m == "auto":
            path = ", ".join(f"M = {p['size']}: KL {p['kl']:.3g} ({p['verdict']}"
                             f"{', screened' if p.get('screened') else ''})" for p in cs.info["path"])
            _log(f"[auto] {method}: size {cs.capacity} ({cs.num_points} points) for tol = {config['tol']}; "
                 f"tried {path}")
        rows.append({"method": method, "size": m, "num_points": cs.num_points,
                     "time_s": median if median is not None else first, "first_call_s": first,
                     "time_is_first_call": median is None,
                     "relative_error": float(relative_error(V, cs)),
                     "indices": np.asarray(cs.indices).tolist(),
                     "weights": np.asarray(cs.weights).astype(float).tolist()})
        if m == "auto":
            rows[-1].update(chosen_size=cs.capacity, path=cs.info["path"], tol=config["tol"])
    report = {
        "config": config,
        "n": n,
        "n_test": 0 if dataset.Xt is None else int(dataset.Xt.shape[0]),
        "dim": int(approx.mean.shape[0]),
        "laplace_mean": [float(x) for x in approx.mean],
        "stages": stages,
        "results": rows,
        "environment": environment(),
    }
    if sample or config["certify"]:
        key_chains, key_full = jax.random.split(key_mcmc)
        draws = _coreset_draws(config, model, data, coresets, key_chains)
        if config["certify"]:
            _certify_rows(model, data, coresets, draws, rows)
        if test_data is not None:
            _test_rows(model, test_data, draws, rows)
        if sample:
            report["sampling"] = _posterior_quality(config, model, data, draws, rows, key_full, test_data)
    if out is not None:
        from .report import write_outputs
        report["files"] = write_outputs(out, report, model, data, dataset, coresets, approx, config)
    return report


def _coreset_draws(config, model, data, coresets, key) -> dict:
    """One MCMC chain on each coreset (the `sample` settings): {(method, M): Posterior}."""
    import jax

    from ..inference import sample

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
    from ..certification import certify

    for label, cs in coresets.items():
        cert = certify(model, data, cs, draws[label].samples)
        row = next(r for r in rows if (r["method"], r["size"]) == label)
        row.update(khat=cert.khat, kl_estimate=cert.kl, kl_se=cert.kl_se, verdict=cert.verdict,
                   certify_time_s=cert.time_s)
        if cert.verdict in ("unreliable", "poor"):  # printed even with --quiet: it is a result, not progress
            why = ("khat >= 0.7: its posterior misses mass of the full-data posterior" if cert.verdict == "unreliable"
                   else "KL >= 0.5 nat: its posterior is far from the full-data posterior")
            print(f"coresets-jax: warning: {label[0]} at M = {label[1]}: certificate {cert.verdict} (khat "
                  f"{cert.khat:.2f}, KL estimate {cert.kl:.3g}; {why}); use a larger M or another method",
                  file=sys.stderr)


def _test_rows(model, test_data, draws, rows) -> None:
    """The mean predictive log-likelihood of the held-out rows under each coreset's chain, into its row."""
    from .. import metrics

    for (method, m), post in draws.items():
        row = next(r for r in rows if (r["method"], r["size"]) == (method, m))
        row["test_log_likelihood"] = float(metrics.test_log_likelihood(model, test_data, post.samples))


def _posterior_quality(config, model, data, draws, rows, key, test_data=None) -> dict:
    """NUTS on the full data (two chains); W1 of each coreset's chain against the full data's second chain,
    divided by the noise floor W1(full chain 1, full chain 2) at the same number of draws; with held-out
    rows, also the full data's test log-likelihood."""
    import numpy as np

    from .. import metrics
    from ..inference import sample

    settings = config["sample"]
    common = dict(method=settings["method"], num_samples=settings["num_samples"],
                  num_warmup=settings["num_warmup"])
    _log(f"[sample] {settings['method']} on the full data (2 chains of {settings['num_samples']} draws)")
    full = sample(model, data, key, weights=None, num_chains=2, **common)
    chains = np.asarray(full.samples)
    floor = metrics.wasserstein1(chains[0], chains[1])
    out = {"settings": settings, "noise_floor_w1": floor, "full_time_s": full.wall_time,
           "full_mean": chains.reshape(-1, chains.shape[-1]).mean(0).tolist(), "draws": {"full": chains}}
    if test_data is not None:
        out["full_test_log_likelihood"] = float(metrics.test_log_likelihood(model, test_data, full.samples))
    for (method, m), post in draws.items():
        chain = np.asarray(post.samples[0])
        w1 = metrics.wasserstein1(chain, chains[1])
        out["draws"][f"{method}, M={m}"] = chain
        row = next(r for r in rows if (r["method"], r["size"]) == (method, m))
        row.update(w1=w1, w1_over_floor=float(metrics.normalized_wasserstein1(w1, floor)),
                   sample_time_s=post.wall_time)
    return out


def environment() -> dict:
    import jax

    from .. import __version__
    return {"coresets_jax": __version__, "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "python": platform.python_version()}
