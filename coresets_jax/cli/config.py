"""The main job's config: every key, its check and its default; one-line errors (`ConfigError`)."""

from __future__ import annotations

import copy
import functools
import os
from typing import Any, Callable, Optional

from ..core import validate as _v

__all__ = ["ConfigError", "SCHEMA", "check_out", "load_config", "validate_config"]

EXIT_USAGE = 2

# --------------------------------------------------------------------------------------------------------
# The config schema: every key, its check, its default. Nested mappings are schemas themselves.


class ConfigError(ValueError):
    """A mistake in the config or the command line: reported as one line, exit status 2."""


def _methods() -> tuple:
    """Every registered construction (vector solvers and posterior-driven methods)."""
    from ..registry import methods
    return tuple(methods())


# The package's option checks (core.validate), raising ConfigError: one line, exit status 2.
_positive_int = functools.partial(_v.check_positive_int, error=ConfigError)
_non_negative_int = functools.partial(_v.check_nonneg_int, error=ConfigError)
_int = functools.partial(_v.check_int, error=ConfigError)
_bool = functools.partial(_v.check_bool, error=ConfigError)
_positive_float = functools.partial(_v.check_positive_float, error=ConfigError)


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
    from ..registry import resolve

    construction = resolve(method)
    allowed = list(construction.options)
    if construction.needs == "vectors":
        allowed += ["refit", "compress", "compress_tol"]  # `cj.build`'s own options
    try:
        renamed = construction.rename_aliases(opts)  # old names are documented aliases (issue 23)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    for name in renamed:
        if name not in allowed:
            raise ConfigError(f"{where}.{name}: not an option of {method}; allowed options: "
                              f"{', '.join(allowed)}{construction.alias_note()}")


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
