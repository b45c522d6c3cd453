"""Before/after table of issue 15's bad inputs: what each case of tests/test_bad_inputs.py gives.

Runs every case of the table against whichever `coresets_jax` is importable and records, per case, the
exception type and message (first line, truncated) or "returned ...". The {0, 1}-label cases record the
largest difference from the {-1, +1} result. Only the public API is used, so the same script runs against
an older checkout (put it first on PYTHONPATH):

    PYTHONPATH=/work/main /work/main/.venv/bin/python benchmarks/investigations/bad_inputs_table.py --out /tmp/before
    PYTHONPATH=. /work/main/.venv/bin/python benchmarks/investigations/bad_inputs_table.py \
        --before /tmp/before/bad_inputs.json --markdown

Writes <out>/bad_inputs.{json,png} (default benchmarks/results; *_quick.* with --quick: the first 8 cases and
2 label stages). With --before, the JSON also holds the earlier outcomes, and --markdown writes the table to
<out>/bad_inputs.md and prints it. The PNG counts the outcomes by kind.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import sys
import tempfile
import warnings

import jax
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/ (this file is in investigations/)
sys.path.insert(0, HERE)  # common; the package is whichever is importable (see above)
import common  # noqa: E402


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


def _extra(p):
    p.add_argument("--before", help="JSON of an earlier run, merged in as the 'before' column")
    p.add_argument("--markdown", action="store_true", help="write <out>/<stem>.md (case | before | after)")


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    args = common.resolve(argv, quick, out_dir, __doc__, _extra)
    table = _load_table()
    cases, zero_one = table.CASES, list(table.ZERO_ONE.items())
    if args.quick:
        cases, zero_one = cases[:8], zero_one[:2]
    rows = {}
    cwd = os.getcwd()
    os.chdir(tempfile.mkdtemp())  # a case that writes a file writes it here
    try:
        for name, call, _, reason in cases:
            rows[name] = {"outcome": _outcome(call), "owner": reason or "reliability"}
            print(name, "->", rows[name]["outcome"], file=sys.stderr)
        for stage, fn in zero_one:
            rows[f"labels_0_1/{stage}"] = {"outcome": _difference(fn, table.ZO, table.PM), "owner": "reliability"}
            print(stage, "->", rows[f"labels_0_1/{stage}"]["outcome"], file=sys.stderr)
    finally:
        os.chdir(cwd)
    report = {"quick": bool(args.quick), "environment": common.environment(),
              "package": os.path.dirname(__import__("coresets_jax").__file__), "cases": rows}
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
        for name, row in rows.items():
            row["before"] = before["cases"].get(name, {}).get("outcome", "(not run)")
        report["before_package"] = before.get("package")
    stem = common.stem("bad_inputs", args.quick)
    print("wrote", common.write_json(report, args.out, stem), file=sys.stderr)
    plot(report, args.out, stem)
    if args.markdown:
        cell = lambda s: " ".join(s.split()).replace("|", "\\|")
        lines = ["| case | before | after |", "|---|---|---|"]
        lines += [f"| {name} | {cell(row.get('before', ''))} | {cell(row['outcome'])} |" for name, row in rows.items()]
        with open(os.path.join(args.out, f"{stem}.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))
    return report


def _kind(outcome: str) -> str:
    """The exception's type, "returned" or the {0, 1}-label verdict."""
    if outcome.startswith(("identical", "differs")):
        return outcome.split(" ")[0]
    return "returned" if outcome.startswith("returned") else outcome.split(":")[0]


def plot(report, out_dir, stem):
    columns = [("after", [r["outcome"] for r in report["cases"].values()])]
    if any("before" in r for r in report["cases"].values()):
        columns.insert(0, ("before", [r["before"] for r in report["cases"].values()]))
    counts = {label: collections.Counter(_kind(o) for o in outcomes) for label, outcomes in columns}
    kinds = sorted(set().union(*counts.values()))
    fig, axes = common.figure(1, 1, size=(6.0, 3.2))
    ax = axes[0][0]
    y = np.arange(len(kinds))
    for k, (label, _) in enumerate(columns):
        ax.barh(y + 0.4 * k, [counts[label][kind] for kind in kinds], 0.4, label=label)
    ax.set_yticks(y + 0.2 * (len(columns) - 1), kinds, fontsize=8)
    ax.set(xlabel="cases", title=f"{len(report['cases'])} bad inputs: what each gives")
    ax.legend(fontsize=8)
    common.save_figure(fig, out_dir, stem)


if __name__ == "__main__":
    main()
