"""The automatic size (`cj.coreset(..., tol=...)`) rechecked with the current code against the oracles that
`benchmarks/auto_size.py` measured (`results/auto_size.json`).

Since that run the search changed where its certificates' chains start (a size's chains start at the previous
size's draws only after a good or usable verdict), cj.laplace retries a failed Newton fit, and cj.sample runs
a coreset's chains one after another on a CPU. None of these changes the coreset that OMP builds at a given
size and key on these problems (J stays 500 below 134,217 rows), so the stored oracle of each cell, the
smallest size on the grid whose measured KL is at most tol, still holds. For each stored cell this runs the
search again with the same key and method, then measures the returned coreset's KL as auto_size.py does
(2 x 1000 NUTS draws: the two-moment KL against the cached full-data reference, the exact KL for the Gaussian
location model, or the bridge-sampling KL where the stored cell used it), and scores both "done when" lines
of the automatic size:
  - wherever the certificate says good or usable (and tol was reached), measured KL <= 3 tol;
  - the chosen size at most 2x the stored oracle,
on the resolved cells (the measured KL's floor below tol / 3), with auto_size.py's `summarise`. The stored
result's own chosen size, verdict and KL are kept beside the new ones. Writes
results/auto_size_recheck.json (*_quick: one cell).

    python benchmarks/investigations/auto_size_recheck.py [--problems phishing ds1] [--tols 0.1]
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402

import coresets_jax as cj  # noqa: E402
import auto_size  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

STORED = os.path.join(HERE, "results", "auto_size.json")
KEPT = ("problem", "tol", "trial", "method", "oracle", "oracle_path", "oracle_scan", "kl_floor")


def recheck(stored: dict, problem, ref) -> dict:
    """One stored cell searched again: the stored oracle, the new choice and its measured KL."""
    name, tol, trial, method = stored["problem"], stored["tol"], stored["trial"], stored["method"]
    key = jax.random.key(100 + trial)  # auto_size.run_cell's key
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cs = cj.coreset(problem["model"], problem["data"], key=key, tol=tol, method=method)
        jax.block_until_ready(cs.weights)
    seconds = time.perf_counter() - t0
    measure = stored.get("kl_measure", "two_moment")
    got = auto_size.measured_kl(problem, ref, cs, jax.random.fold_in(key, 9), measure)
    row = {k: stored.get(k) for k in KEPT}
    row.update(size=cs.capacity, points=cs.num_points, seconds=seconds, path=cs.info["path"],
               reached=any(p["passed"] for p in cs.info["path"]), verdict=cs.certificate.verdict,
               cert_kl=float(cs.certificate.kl), warned=auto_size.unreached_warning(caught) is not None,
               kl=got["kl"], kl_measure=got["measure"],
               stored={"size": stored["size"], "verdict": stored["verdict"], "kl": stored["kl"],
                       "cert_kl": stored["cert_kl"], "commit": stored.get("commit")})
    if got["measure"] == "bridge":  # as auto_size.run_cell: the floor is the estimate's own noise here
        row["kl_floor"] = got["noise"]
    return row


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=None, help="default: every problem of the stored run")
        p.add_argument("--tols", nargs="+", type=float, default=None, help="default: every stored tol")
        p.add_argument("--data-dir", default=common.DATA_DIR)

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    with open(STORED) as f:
        stored_runs = json.load(f)["runs"]
    cells = [r for r in stored_runs if (args.problems is None or r["problem"] in args.problems)
             and (args.tols is None or r["tol"] in args.tols)]
    if args.quick:
        cells = [r for r in stored_runs if r["problem"] == "gaussian_location"][:1]
    rows, loaded = [], {}
    for i, cell in enumerate(cells):
        name = cell["problem"]
        if name not in loaded:
            problem = models.load_problem(name, args.data_dir)
            loaded = {name: (problem, auto_size.full_reference(name, problem))}  # one problem in memory
        row = recheck(cell, *loaded[name])
        rows.append(row)
        print(f"[{i + 1}/{len(cells)}] {name} tol {row['tol']} trial {row['trial']}: size {row['size']} "
              f"(stored {row['stored']['size']}, oracle {row['oracle']}), {row['verdict']}, cert KL "
              f"{row['cert_kl']:.3g}, measured KL {row['kl']:.3g} (floor {row['kl_floor']:.3g}), "
              f"{row['seconds']:.1f} s", flush=True)
    summary = auto_size.summarise(rows)
    stored_summary = auto_size.summarise(cells)  # the stored rows of the same cells, scored the same way
    result = {"environment": common.environment(), "stored_commit": sorted({r["stored"]["commit"] or ""
                                                                           for r in rows}),
              "summary": summary, "stored_summary_same_cells": stored_summary, "runs": rows}
    path = common.write_json(result, args.out, "auto_size_recheck_quick" if args.quick else "auto_size_recheck")
    print(json.dumps(summary, indent=1))
    print("wrote", path)
    return result


if __name__ == "__main__":
    main()
