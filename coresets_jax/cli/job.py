"""The main job: pi_hat, projection, each coreset timed, its certificate, and with --sample full-data MCMC."""

from __future__ import annotations

import platform
import statistics
import sys
import time
from typing import Optional

from .config import ConfigError

__all__ = ["run_job"]

_quiet = {"on": False}


def _log(msg: str) -> None:
    if not _quiet["on"]:
        print(msg, file=sys.stderr, flush=True)


def _construct(method: str, size: int, model, data, V, key, options: dict, approx=None):
    """One coreset by method name, as its registry entry declares: vector methods on V (`cj.build`),
    posterior-driven ones on the model (`cj.coreset`, started from the same pi_hat)."""
    from ..construct import build, coreset
    from ..registry import resolve

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

    from ..data import load_npz, synthetic_logistic, synthetic_poisson

    if "path" in spec:
        return load_npz(spec["path"])
    make = {"logistic": synthetic_logistic, "poisson": synthetic_poisson}[spec["synthetic"]]
    return make(jax.random.key(spec["seed"]), spec["n"])


def run_job(config: dict, sample: bool = False, out: Optional[str] = None) -> dict:
    import jax
    import numpy as np

    from .. import progress
    from ..construct import relative_error
    from ..models import logistic_regression, poisson_regression
    from ..pihat import laplace
    from ..projection import project

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
        from .report import write_outputs  # the report module reads this one's log
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


def _posterior_quality(config, model, data, draws, rows, key) -> dict:
    """NUTS on the full data (two chains); W1 of each coreset's chain against the full data's second chain,
    divided by the noise floor W1(full chain 1, full chain 2) at the same number of draws."""
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
    for (method, m), post in draws.items():
        chain = np.asarray(post.samples[0])
        w1 = metrics.wasserstein1(chain, chains[1])
        out["draws"][f"{method}, M={m}"] = chain
        row = next(r for r in rows if (r["method"], r["size"]) == (method, m))
        row.update(w1=w1, w1_over_floor=float(metrics.normalized_wasserstein1(w1, floor)),
                   sample_time_s=post.wall_time)
    return out


def _environment() -> dict:
    import jax

    from .. import __version__
    return {"coresets_jax": __version__, "jax": jax.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "python": platform.python_version()}
