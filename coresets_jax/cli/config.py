"""The main job's config: every key, its check and its default; one-line errors (`ConfigError`).

Keys (`SCHEMA`; configs/default.yaml shows each with its default):

  model: logistic_regression | poisson_regression | package.module:function
  prior_scale: s              the built-in models' prior N(0, s^2 I)
  model_options: {k: v}       keyword arguments of your own model's function (not for the built-in models)
  data:                       built-in synthetic data (synthetic, n, seed) or a file (path, ...):
    synthetic: logistic | poisson,  n: rows,  seed: seed
    path: FILE.npz | FILE.csv   relative paths resolve against the config's folder
    label: y                    a CSV file's label column
    intercept: false            true: append a column of ones to X (as the last column)
    test_path: FILE             held-out rows from a second file (same format rules; CSV: the same columns)
    num_test: 0                 or hold out the last num_test rows (of the file, or extra synthetic rows)
  norm, num_features, methods (or method + baseline), options, sizes, repeats, seed, certify, sample

Data files. `.npz`: arrays X (N, D) and y (N,), optionally Xt, yt (held-out rows). `.csv`: row 1 is a
header naming the columns; the column named `y` (`data.label`) is the label and every other column is a
feature, in the file's order; each further row is one datum, every cell a finite number (quotes and spaces
around it are allowed, blank lines are skipped). X is used as it is: add `intercept: true` when the file has
no column of ones. For example, with `data: {path: trips.csv, intercept: true}`:

  hour,temp,y
  7,12.5,31
  8,13.0,48

gives X = [[7, 12.5, 1], [8, 13, 1]] and y = [31, 48]. A mistake in the file ends the run with one line naming
the file, the row (counted as a spreadsheet does: the header is row 1, the first datum row 2) and the column
(its name and letter): an empty cell, a cell that is not a number or not finite, a row with more or fewer
cells than the header, no column named as `data.label`, an empty file, a header without data rows. Any other
extension is refused, naming the supported ones.

Your own model. `model: package.module:function` imports `package.module` (from sys.path, then the config's
folder, then the current folder) when the config is read, and calls `function(**model_options)` when the job
starts. The function returns one of

- a `cj.Model` (give it `dim=D`, or `init_params`): it gets the data as the pytree (X, y), one datum
  (x_n, y_n), X with the intercept column when `intercept: true`;
- a NumPyro model function, called as `fn(X, y)` (positionally; declare it as `def fn(X, y=None)`), with
  the observed site inside one `numpyro.plate` over the rows: it goes through `cj.from_numpyro(fn, X, y)`,
  whose data is then {name of fn's first argument: X, name of its second: y}.

The attribute may also be a `cj.Model` itself (`model: package.module:MODEL`). A module that cannot be
imported, a missing attribute, a call that fails and a result of another type each end in one line naming
`config.model` and its value.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
import re
import sys
from typing import Any, Callable, Optional

from ..core import validate as _v

__all__ = ["ConfigError", "SCHEMA", "call_model", "check_out", "import_model", "load_config", "method_names",
           "validate_config"]

EXIT_USAGE = 2

# --------------------------------------------------------------------------------------------------------
# The config schema: every key, its check, its default. Nested mappings are schemas themselves.


class ConfigError(ValueError):
    """A mistake in the config or the command line: reported as one line, exit status 2."""


def method_names() -> tuple:
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


def _list_or_empty(check_item, what: str):
    def check(value, where):
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list of {what} (possibly empty), got {value!r}")
        return [check_item(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return check


def _size(value, where):
    """A coreset size: a positive integer, or "auto" (the certificate chooses it, `tol`)."""
    if value == "auto":
        return value
    return _positive_int(value, where)


def _features(value, where):
    """J: a positive integer, or "auto" (`cj.features.projection.auto_num_features` of D and the largest size)."""
    if value == "auto":
        return value
    return _positive_int(value, where)


def _list_of(check_item, what: str, single: bool = False):
    """A non-empty list of items; with `single`, one item alone stands for a list of it (`sizes: auto`)."""
    def check(value, where):
        if single and not isinstance(value, (list, dict)) and value is not None:
            return [check_item(value, where)]
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
        _choice(method_names)(method, f"{where} key")
        if not isinstance(opts, dict):
            raise ConfigError(f"{where}.{method}: expected a mapping of options, got {opts!r}")
        for name, option in opts.items():
            if not isinstance(option, (bool, int, float, str)):
                raise ConfigError(f"{where}.{method}.{name}: options must be numbers, booleans or strings, "
                                  f"got {option!r}")
    return value


MODELS = ("logistic_regression", "poisson_regression")
_USER_MODEL = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _model(value, where):
    """A built-in model's name, or `package.module:function` (imported by `import_model`)."""
    if isinstance(value, str) and value in MODELS:
        return value
    if isinstance(value, str) and ":" in value:
        if not _USER_MODEL.match(value):
            raise ConfigError(f"{where}: {value!r} is not of the form package.module:function (dotted Python "
                              f"names around one colon)")
        return value
    raise ConfigError(f"{where}: {value!r} is not allowed; allowed values: {', '.join(MODELS)}, or "
                      f"package.module:function for your own model")


def _mapping(value, where):
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{where}: expected a mapping of keyword arguments, e.g. {{scale: 2.0}}, got {value!r}")
    return value


def _search_path(base: Optional[str]) -> list:
    """Folders searched for a user's model module after sys.path: the config's folder, then the current one."""
    return [p for p in dict.fromkeys([base, os.getcwd()]) if p]


def import_model(spec: str, base: Optional[str] = None, where: str = "config.model"):
    """The object named by `package.module:attribute`: a function (or a `cj.Model`); ConfigError otherwise.

    The module is looked up on sys.path, then in `base` (the config's folder) and the current folder; those
    two are on sys.path only while the module is imported."""
    from ..core.model import Model

    module_name, attribute = spec.split(":")
    extra = [p for p in _search_path(base) if p not in sys.path]
    sys.path.extend(extra)
    try:
        importlib.invalidate_caches()
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
            raise ConfigError(f"{where}: {spec!r}: no module named {err.name!r} (searched sys.path, "
                              f"{', '.join(_search_path(base))})") from None
        raise ConfigError(f"{where}: {spec!r}: importing {module_name} failed: {err}") from None
    except Exception as err:  # the user's module raised: one line, with its own message
        line = f" (line {err.lineno})" if isinstance(err, SyntaxError) and err.lineno else ""
        first = str(err).splitlines()[0] if str(err) else ""
        raise ConfigError(f"{where}: {spec!r}: importing {module_name} failed: {type(err).__name__}: "
                          f"{first}{line}") from None
    finally:
        for p in extra:
            sys.path.remove(p)
    obj = module
    for i, name in enumerate(attribute.split(".")):
        if not hasattr(obj, name):
            owner = module_name + "".join("." + a for a in attribute.split(".")[:i])
            found = getattr(module, "__file__", None)
            raise ConfigError(f"{where}: {spec!r}: {owner} has no attribute {name!r}"
                              + (f" (module file {found})" if found and i == 0 else ""))
        obj = getattr(obj, name)
    if not (isinstance(obj, Model) or callable(obj)):
        raise ConfigError(f"{where}: {spec!r} is not a function (its type is {type(obj).__name__}); expected a "
                          f"function returning a cj.Model or a NumPyro model function")
    return obj


def call_model(spec: str, obj, options: dict, where: str = "config.model"):
    """What the user's function returns: a `cj.Model`, or a NumPyro model function (a callable)."""
    from ..core.model import Model

    if isinstance(obj, Model):
        if options:
            raise ConfigError(f"config.model_options: {spec!r} is a cj.Model, not a function; it takes no "
                              f"options")
        result = obj
    else:
        try:
            result = obj(**options)
        except Exception as err:
            first = str(err).splitlines()[0] if str(err) else ""
            raise ConfigError(f"{where}: calling {spec}({', '.join(f'{k}={v!r}' for k, v in options.items())}) "
                              f"failed: {type(err).__name__}: {first} (it is called with model_options as "
                              f"keyword arguments and returns a cj.Model or a NumPyro model function)") from None
    if isinstance(result, Model):
        if result.dim is None and result.init_params is None:
            raise ConfigError(f"{where}: {spec!r} returned a cj.Model without dim or init_params; build it "
                              f"with cj.Model(..., dim=D) so that the job knows theta's length D")
        return result
    if callable(result) and not isinstance(result, type):
        return result
    raise ConfigError(f"{where}: {spec!r} returned {type(result).__name__}; expected a cj.Model or a NumPyro "
                      f"model function")
SYNTHETIC = ("logistic", "poisson")
NORMS = ("fisher", "l2", "centered")
SAMPLERS = ("nuts", "hmc", "mala", "rwmh")

# key: (check, default, help). A dict default with a dict check is a nested schema.
DATA_SCHEMA: dict = {
    "synthetic": (_choice(SYNTHETIC), "logistic", "built-in generator (HC §7.2); or give path"),
    "n": (_positive_int, 10_000, "rows of synthetic data"),
    "seed": (_int, 0, "seed of the synthetic data"),
    "path": (_string, None, ".npz (arrays X, y) or .csv file (header row, label column y), relative to the "
                            "config's folder"),
    "label": (_string, "y", "a CSV file's label column; every other column is a feature"),
    "intercept": (_bool, False, "append a column of ones to X (files only; synthetic X has one)"),
    "test_path": (_string, None, "held-out rows from a second file (relative to the config's folder)"),
    "num_test": (_non_negative_int, 0, "hold out the last num_test rows (synthetic: extra rows)"),
}
FILE_ONLY = ("label", "intercept", "test_path")
SAMPLE_SCHEMA: dict = {
    "method": (_choice(SAMPLERS), "nuts", "MCMC kernel"),
    "num_samples": (_positive_int, 500, "draws per chain"),
    "num_warmup": (_positive_int, 500, "adaptation steps per chain"),
}
SCHEMA: dict = {
    "model": (_model, "logistic_regression", "built-in model, or package.module:function (your own)"),
    "prior_scale": (_positive_float, 1.0, "prior N(0, s^2 I) of the built-in models"),
    "model_options": (_mapping, {}, "keyword arguments of your own model's function"),
    "data": (DATA_SCHEMA, None, "the data"),
    "norm": (_choice(NORMS), "fisher", "projection norm"),
    "num_features": (_features, "auto", "J, the projection dimension; auto: as cj.coreset's default, for the largest size"),
    "methods": (_list_of(_choice(method_names), "method names", single=True), None,
                "construction methods to compare"),
    "method": (_choice(method_names), "frank_wolfe", "the method (when methods is not given)"),
    "baseline": (_choice(method_names), "uniform", "the baseline (when methods is not given)"),
    "options": (_options, {}, "per-method options"),
    "sizes": (_list_of(_size, "positive integers or auto", single=True), [10, 100, 1000],
              "coreset sizes M; auto: the smallest size whose certificate reaches tol (vector methods)"),
    "tol": (_positive_float, 0.1, "nats: the KL(pi_w || pi) an auto size must reach (cj.coreset(tol=...))"),
    "auto": (_list_or_empty(_choice(method_names), "method names"), ["omp"],
             "methods also built at the size their certificate chooses (auto, for tol), beside the fixed sizes; "
             "[omp] when the config names no methods, else none unless listed"),
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
    if isinstance(user, dict) and "size" in user:  # `size: auto` reads as naturally as `sizes: [auto]`
        if "sizes" in user:
            raise ConfigError("config.size: give either size or sizes, not both")
        user = {("sizes" if k == "size" else k): v for k, v in user.items()}
    config = _check_mapping(user if user is not None else {}, SCHEMA, "config")
    user_keys = set(user or {})
    if config["model"] in MODELS:
        if "model_options" in user_keys:
            raise ConfigError(f"config.model_options: applies to model: package.module:function only; the "
                              f"built-in {config['model']} takes prior_scale")
        config.pop("model_options")
    else:
        if "prior_scale" in user_keys:
            raise ConfigError(f"config.prior_scale: applies to the built-in models only; pass your model's "
                              f"settings in model_options (keyword arguments of {config['model']})")
        config.pop("prior_scale")
        import_model(config["model"], base)  # a missing module or attribute stops the run here
    config["data"] = _check_data(config["data"], (user or {}).get("data", {}) or {}, config["model"], base)
    if "methods" in user_keys and user_keys & {"method", "baseline"}:
        raise ConfigError("config.methods: give either methods (a list) or method/baseline, not both")
    if config["methods"] is None:
        config["methods"] = list(dict.fromkeys([config["method"], config["baseline"]]))
    config.pop("method")
    config.pop("baseline")
    if user_keys & {"methods", "method", "baseline"} and "auto" not in user_keys:
        config["auto"] = []  # a config that names its methods runs those only; the main job adds omp at auto size
    for method, opts in config["options"].items():
        if method not in config["methods"] and method not in config["auto"]:
            raise ConfigError(f"config.options.{method}: {method!r} is not in methods {config['methods']}")
        _check_method_options(method, opts, f"config.options.{method}")
    if "tol" in user_keys and "auto" not in config["sizes"] and not config["auto"]:
        raise ConfigError("config.tol: applies to automatic sizes only (sizes: [auto], or methods in auto: "
                          "[...]); add one, or remove tol")
    from ..registry import resolve

    auto_posterior = [m for m in config["methods"] if resolve(m).needs == "posterior"]
    if "auto" in config["sizes"] and auto_posterior:
        raise ConfigError(f"config.sizes: auto searches sizes with a vector method; {auto_posterior[0]!r} is "
                          "posterior-driven: give it integer sizes")
    for i, m in enumerate(config["auto"]):
        if resolve(m).needs == "posterior":
            raise ConfigError(f"config.auto[{i}]: {m!r} is posterior-driven; the automatic size searches with a "
                              "vector method (e.g. omp)")

    data = config["data"]
    if "synthetic" in data:
        for i, m in enumerate(config["sizes"]):
            if m != "auto" and m > data["n"]:
                raise ConfigError(f"config.sizes[{i}]: M = {m} exceeds the number of rows n = {data['n']}")
    return config


def _resolve(path: str, base: str) -> str:
    return path if os.path.isabs(path) else os.path.normpath(os.path.join(base, path))


def _check_file(key: str, path: str, base: str, model: str) -> str:
    from ..data import DATA_FORMATS

    resolved = _resolve(path, base)
    ext = os.path.splitext(resolved)[1].lower()
    formats = "; ".join(f"{k} with {v}" for k, v in DATA_FORMATS.items())
    if ext not in DATA_FORMATS:
        got = f"extension {ext!r}" if ext else "no extension"
        raise ConfigError(f"config.data.{key}: {path!r} has {got}; supported data files: {formats}")
    if not os.path.isfile(resolved):
        synthetic = "poisson" if model == "poisson_regression" else "logistic"
        raise ConfigError(f"config.data.{key}: no file at {resolved} (relative paths resolve against the "
                          f"config's folder {base}); put the data file there ({formats}; see the comments at "
                          f"the top of the config), or use data: {{synthetic: {synthetic}}}")
    return resolved


def _check_data(data: dict, given: dict, model: str, base: str) -> dict:
    """The data section: synthetic data or a file, and only the keys that apply to the one chosen."""
    if "path" in given and "synthetic" in given:
        raise ConfigError("config.data: give either path (an .npz or .csv file) or synthetic (logistic | "
                          "poisson), not both")
    if "path" in given:
        extra = [k for k in ("n", "seed") if k in given]
        if extra:
            raise ConfigError(f"config.data.{extra[0]}: applies to synthetic data only, not to data.path")
        data["path"] = _check_file("path", data["path"], base, model)
        if "label" in given and not data["path"].lower().endswith(".csv"):
            raise ConfigError("config.data.label: applies to a .csv file; an .npz file names its arrays X, y")
        if data["test_path"] is not None:
            data["test_path"] = _check_file("test_path", data["test_path"], base, model)
            if "num_test" in given and data["num_test"]:
                raise ConfigError("config.data.num_test: give the held-out rows either as test_path or as "
                                  "num_test, not both")
        else:
            data.pop("test_path")
        data.pop("synthetic")
        for k in ("n", "seed"):
            data.pop(k)
    else:
        extra = [k for k in FILE_ONLY if k in given]
        if extra:
            raise ConfigError(f"config.data.{extra[0]}: applies to a data file (data.path) only, not to "
                              f"synthetic data")
        for k in ("path",) + FILE_ONLY:
            data.pop(k)
    return data


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
