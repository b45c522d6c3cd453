"""coresets-jax: build Bayesian coresets from the command line.

  coresets-jax run [CONFIG.yaml] [--out DIR] [--quiet] [--sample]   the main job (no config: built-in data)
  coresets-jax bench NAME [--quick]                                 run benchmarks/[investigations/]NAME.py
  coresets-jax info                                                 versions, devices, methods

With no config, `run` does HC §7.2's synthetic logistic regression (N = 10,000, theta = [3, 3, 0]): Laplace
pi_hat, Fisher projection with J = 500, and Frank–Wolfe coresets for M in {10, 100, 1000} against uniform
subsampling. A config may instead name a data file (`data: {path: FILE.npz | FILE.csv}`; a CSV file has a
header row, its label column is `y`) and the user's own model (`model: package.module:function`, returning a
`cj.Model` or a NumPyro model); `config.py`'s docstring has the conventions. The whole config is checked
before any work; every mistake ends in one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Optional

from .config import EXIT_USAGE, SCHEMA, ConfigError, check_out, load_config, method_names, validate_config
from .job import environment, run_job
from .log import log as _log, quiet as _set_quiet
from .report import format_table

__all__ = ["ConfigError", "format_table", "load_config", "main", "run_job", "validate_config"]


def _repo_benchmarks() -> Optional[str]:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    folder = os.path.join(here, "benchmarks")
    return folder if os.path.isdir(folder) else None


def _benchmarks(folder: str) -> dict:
    """{name: has a quick mode} for the scripts in `folder` that run as programs (helpers such as common.py
    have no `__main__` guard). A quick mode is an `add_argument("--quick"...)` or the shared `common.resolve`
    / `common.parser`, which add it."""
    found = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".py") and not f.startswith("_"):
            with open(os.path.join(folder, f)) as handle:
                source = handle.read()
            if 'if __name__ == "__main__":' in source:
                found[f[:-3]] = any(s in source for s in ('"--quick"', "common.resolve(", "common.parser("))
    return found


def _investigations(folder: str) -> dict:
    """The same for benchmarks/investigations/: one-off studies, run by the same `bench NAME`."""
    sub = os.path.join(folder, "investigations")
    return _benchmarks(sub) if os.path.isdir(sub) else {}


def run_bench(name: str, quick: bool) -> int:
    folder = _repo_benchmarks()
    if folder is None:
        raise ConfigError("bench: no benchmarks/ folder beside the package; run from a clone of the repository")
    available, studies = _benchmarks(folder), _investigations(folder)
    if name in available:
        script, has_quick = os.path.join(folder, f"{name}.py"), available[name]
    elif name in studies:
        script, has_quick = os.path.join(folder, "investigations", f"{name}.py"), studies[name]
    else:
        raise ConfigError(f"bench: unknown benchmark {name!r}; available: {', '.join(available)}; "
                          f"investigations (one-off studies): {', '.join(studies)}")
    if quick and not has_quick:  # it would run in full, or die in argparse: say so instead
        raise ConfigError(f"bench: {name} has no --quick mode; run 'coresets-jax bench {name}' for the full run")
    command = [sys.executable, script] + (["--quick"] if quick else [])
    _log("running " + " ".join(command))
    code = subprocess.call(command, cwd=os.path.dirname(folder))
    if code != 0:  # the script's own traceback is above; the exit status says the run failed
        print(f"bench: {name} failed with exit status {code}", file=sys.stderr)
    return code


def info() -> str:
    import jax

    from ..inference.sample import METHODS as SAMPLERS_
    from ..features.projection import NORMS as NORMS_
    env = environment()
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
        f"construction methods: {', '.join(method_names())}",
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
                             description="Run benchmarks/NAME.py or benchmarks/investigations/NAME.py (their results go "
                                         "to benchmarks/results/).")
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
            from .. import progress
            progress.enabled(False)
            _set_quiet(True)
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
        _set_quiet(False)


if __name__ == "__main__":
    sys.exit(main())
