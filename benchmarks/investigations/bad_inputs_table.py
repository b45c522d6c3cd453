"""Before/after table of issue 15's bad inputs: what each case of tests/test_bad_inputs.py gives.

Runs every case of the table against whichever `coresets_jax` is importable and records, per case, the
exception type and message (first line, truncated) or "returned ...". The {0, 1}-label cases record the
largest difference from the {-1, +1} result. Only the public API is used, so the same script runs against
an older checkout:

    PYTHONPATH=/work/main /work/main/.venv/bin/python benchmarks/investigations/bad_inputs_table.py --out /tmp/before.json
    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/investigations/bad_inputs_table.py \
        --out benchmarks/results/bad_inputs.json --before /tmp/before.json --markdown

With --before, the JSON also holds the earlier outcomes and --markdown prints the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import warnings

import jax
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file: benchmarks/investigations/)


def _load_table():
    spec = importlib.util.spec_from_file_location("bad_inputs_cases",
                                                  os.path.join(HERE, "..", "tests", "test_bad_inputs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _outcome(call) -> str:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = call()
        except Exception as err:  # the point is to record whatever happened
            text = str(err).strip().splitlines()
            return f"{type(err).__name__}: {(text[0] if text else '')[:110]}"
    note = f" (warned: {str(caught[0].message)[:60]})" if caught else ""
    try:
        shown = np.array2string(np.asarray(jax.tree_util.tree_leaves(value)[0]), threshold=4, precision=3)
    except Exception:
        shown = type(value).__name__
    return f"returned {' '.join(shown.split())[:60]}{note}"


def _difference(fn, zero_one, plus_minus) -> str:
    try:
        a, b = fn(zero_one), fn(plus_minus)
    except Exception as err:
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:110]}"
    gaps = [float(np.max(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64))))
            if np.shape(u) == np.shape(v) else float("inf")
            for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))]
    gap = max(gaps)
    return "identical to {-1,+1}" if gap == 0 else f"differs from {{-1,+1}} by up to {gap:.3g}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--before", help="JSON of an earlier run, merged in as the 'before' column")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    table = _load_table()
    rows = {}
    cwd = os.getcwd()
    os.chdir(tempfile.mkdtemp())  # a case that writes a file writes it here
    for name, call, _, reason in table.CASES:
        rows[name] = {"outcome": _outcome(call), "owner": reason or "reliability"}
        print(name, "->", rows[name]["outcome"], file=sys.stderr)
    for stage, fn in table.ZERO_ONE.items():
        rows[f"labels_0_1/{stage}"] = {"outcome": _difference(fn, table.ZO, table.PM), "owner": "reliability"}
        print(stage, "->", rows[f"labels_0_1/{stage}"]["outcome"], file=sys.stderr)
    os.chdir(cwd)
    report = {"device": f"{platform.machine()} CPU, shared 2 cores", "jax": jax.__version__,
              "package": os.path.dirname(__import__("coresets_jax").__file__), "cases": rows}
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
        for name, row in rows.items():
            row["before"] = before["cases"].get(name, {}).get("outcome", "(not run)")
        report["before_package"] = before.get("package")
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    if args.markdown:
        print("| case | before | after |\n|---|---|---|")
        for name, row in rows.items():
            cell = lambda s: " ".join(s.split()).replace("|", "\\|")
            print(f"| {name} | {cell(row.get('before', ''))} | {cell(row['outcome'])} |")


if __name__ == "__main__":
    main()
