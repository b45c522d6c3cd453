"""The coreset that sizes itself (`cj.coreset(..., tol=...)`) against an oracle, on the model suite.

For each problem of benchmarks/models.py, seed and tol in {1, 0.1, 0.01}:
  - the chosen size, the path, the certificate, and the total time (certification included);
  - that time plus NUTS on the returned coreset, against full-data NUTS with the same settings timed in
    the same process (its first call, compilation included, and a warm second call); a problem's first
    cell in a process is marked `first_in_process` and compared with the first full-data call;
  - the returned coreset's KL against the full posterior, measured independently of the certificate: the
    exact KL(pi_w || pi) where the posterior is closed form (Gaussian location), else the two-moment KL
    KL(N(mu_w, S_w) || N(mu, S)) between 2 x 1000 NUTS draws of the coreset posterior and the cached
    full-data reference (`models.reference`), whose own noise floor (the same KL between the two reference
    runs) is reported with it;
    With `--kl-measure bridge` (Bradley-Terry, D = 50, where that floor is 0.76 nat at 2 x 2,000 reference
    draws and hides every tol) the measured KL is instead `cj.metrics.bridge_kl`: KL(pi_w || pi) by bridge
    sampling between the coreset's 2 x 1000 draws and the reference draws, from the exact log density ratio
    (no D^2 / draws bias); its noise is the difference between the estimates against each reference run;
  - the oracle: the smallest size on a fine grid (2^(k/4) steps from 16) whose measured KL is at most tol,
    with the same method and key (so the oracle and the search build the same coreset at a shared size);
    `--oracle-scan down` scans the grid downwards from the chosen size instead (`oracle_scan`).
A size is "resolved" when the measured KL's floor is below tol / 3; cells where it is not are reported but
not scored. A no-compression case (logistic regression with D = 50 on N = 500 rows, D near N / 10) shows
the warning when no size reaches tol.

    python benchmarks/auto_size.py --problems phishing biketrips_large --trials 3
    python benchmarks/auto_size.py --report
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

import coresets_jax as cj  # noqa: E402
import common  # noqa: E402
import models  # noqa: E402

LEDGER = os.path.join(models.TMP, "auto_size_runs.jsonl")
NUTS_LEDGER = os.path.join(models.TMP, "auto_size_full_nuts.jsonl")
PROBLEMS = ("gaussian_location", "linear_regression", "phishing", "ds1", "logistic_binary10", "biketrips_large",
            "airportdelays_large", "bradley_terry")
TOLS = (1.0, 0.1, 0.01)
# cj.coreset(..., tol=...)'s two warnings when no size reaches tol (construct/auto_size.py, steps 5 and 6)
UNREACHED_WARNINGS = ("no size up to", "stopped growing")


def two_moment_kl(draws: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """KL(N(mu_hat, S_hat) || N(mean, cov)) (coreset-mcmc.md §4.3), float64."""
    mu, sigma = draws.mean(0), np.cov(draws, rowvar=False).reshape(len(mean), len(mean))
    d = len(mean)
    inv = np.linalg.inv(cov)
    _, logdet = np.linalg.slogdet(cov)
    sign, logdet_hat = np.linalg.slogdet(sigma)
    logdet_hat = logdet_hat if sign > 0 else math.log(1e-20)
    diff = mean - mu
    return float(0.5 * (logdet - logdet_hat - d + np.trace(inv @ sigma) + diff @ inv @ diff))


def measured_kl(problem, ref_full, cs, key, measure="two_moment") -> dict:
    """{"kl", "measure", "noise"}: the coreset posterior's KL(pi_w || pi), measured without the certificate."""
    if problem.get("closed_form"):
        n = models.n_rows(problem)
        mean, cov = problem["model"].posterior(problem["data"])
        mean_w, cov_w = problem["model"].posterior(problem["data"], cs.dense(n))
        return {"kl": float(cj.metrics.gaussian_kl(mean_w, cov_w, mean, cov)), "measure": "exact", "noise": 0.0}
    draws = models.posterior_draws(problem, key, weights=cs)
    two_moment = two_moment_kl(draws[:, ref_full["coords"]], ref_full["mean_all"], ref_full["cov"])
    if measure == "two_moment":
        return {"kl": two_moment, "measure": measure, "noise": ref_full["kl_floor"]}
    return dict(bridge_kl(problem, ref_full, cs, draws), two_moment=two_moment)


def bridge_kl(problem, ref_full, cs, draws) -> dict:
    """`cj.metrics.bridge_kl` against both reference runs pooled; noise: |estimate against run a - against
    run b|. The log ratio at all draws comes from one pass (`bridge_kl_from_log_ratios` needs one shared
    constant)."""
    from coresets_jax.certification.passes import log_ratio

    a, b = ref_full["full_a"], ref_full["full_b"]
    r, _ = log_ratio(problem["model"], problem["data"], cs, np.concatenate([draws, a, b]))
    r_w, r_a, r_b = np.split(r, [len(draws), len(draws) + len(a)])
    kl = cj.metrics.bridge_kl_from_log_ratios(r_w, np.concatenate([r_a, r_b]))["kl"]
    kl_a, kl_b = (cj.metrics.bridge_kl_from_log_ratios(r_w, x)["kl"] for x in (r_a, r_b))
    return {"kl": float(kl), "measure": "bridge", "noise": float(abs(kl_a - kl_b)), "kl_a": float(kl_a),
            "kl_b": float(kl_b)}


def full_reference(name, problem) -> dict:
    ref = models.reference(name, problem)
    z = np.load(os.path.join(models.TMP, f"models_ref_{name}.npz"))
    a, b = z["a"][:, ref["coords"]], z["b"][:, ref["coords"]]
    both = np.concatenate([a, b])
    ref["mean_all"], ref["cov"] = both.mean(0), np.cov(both, rowvar=False).reshape(a.shape[1], a.shape[1])
    ref["kl_floor"] = 0.0 if problem.get("closed_form") else two_moment_kl(b, a.mean(0), np.cov(a, rowvar=False))
    ref["full_a"], ref["full_b"] = z["a"], z["b"]  # every coordinate: the bridge KL evaluates the densities
    return ref


def grid(limit: int) -> list:
    sizes, k = [], 0
    while True:
        m = int(round(16 * 2 ** (k / 4)))
        if m > limit:
            return sizes
        if not sizes or m > sizes[-1]:
            sizes.append(m)
        k += 1


def unreached_warning(caught) -> Optional[str]:
    """The text of the first caught warning that says no size reached tol, or None."""
    return next((str(w.message) for w in caught if any(m in str(w.message) for m in UNREACHED_WARNINGS)), None)


def run_cell(name, problem, ref, tol, trial, method="omp", scan="up", measure="two_moment") -> dict:
    key = jax.random.key(100 + trial)
    model, data = problem["model"], problem["data"]
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cs = cj.coreset(model, data, key=key, tol=tol, method=method)
        jax.block_until_ready(cs.weights)
    seconds = time.perf_counter() - t0
    reached = any(p["passed"] for p in cs.info["path"])
    row = {"problem": name, "tol": tol, "trial": trial, "method": method, "size": cs.capacity,
           "points": cs.num_points, "seconds": seconds, "path": cs.info["path"], "reached": reached,
           "verdict": cs.certificate.verdict, "cert_kl": float(cs.certificate.kl),
           "warned": unreached_warning(caught) is not None, "warning": unreached_warning(caught),
           "kl_floor": ref["kl_floor"]}
    t0 = time.perf_counter()
    got = measured_kl(problem, ref, cs, jax.random.fold_in(key, 9), measure)  # NUTS on the coreset, as a user would
    row["sample_seconds"] = time.perf_counter() - t0
    row.update(kl=got["kl"], kl_measure=got["measure"])
    if got["measure"] == "bridge":  # its floor is its own noise at this coreset, not the reference's
        row.update(kl_floor=got["noise"], kl_against_runs=[got["kl_a"], got["kl_b"]], kl_two_moment=got["two_moment"],
                   kl_two_moment_floor=ref["kl_floor"])

    def kl_at(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = cj.coreset(model, data, m, method, key=key)
        return measured_kl(problem, ref, c, jax.random.fold_in(key, m), measure)["kl"]

    sizes = grid(min(models.n_rows(problem), 4 * row["size"]))
    oracle, tried = oracle_scan(kl_at, sizes, tol, row["size"], scan)
    row.update(oracle=oracle, oracle_path=tried, oracle_scan=scan)
    return row


def oracle_scan(kl_at, sizes, tol, chosen, scan="up"):
    """(oracle, {size: measured KL}): `kl_at(m)` on the grid `sizes` (increasing).

    "up": from the smallest size upwards to the first whose KL is at most tol (the definition). "down" (for
    D = 50, where NUTS on coresets of fewer points than D ran for minutes each): from the largest size at
    most `chosen` downwards while the KL is at most tol, the oracle being the last that passed, or upwards
    from `chosen` if it fails itself. The same oracle as "up" when the KL falls with M along the grid; the
    row records which scan was used."""
    tried = {}
    if scan == "up":
        for m in sizes:
            tried[m] = kl_at(m)
            if tried[m] <= tol:
                return m, tried
        return None, tried
    below = [m for m in sizes if m <= chosen][::-1]
    oracle = None
    for m in below:
        tried[m] = kl_at(m)
        if tried[m] > tol:
            break
        oracle = m
    if oracle is None:  # the chosen size itself fails: upwards from there
        for m in sizes:
            if m in tried:
                continue
            if m > chosen:
                tried[m] = kl_at(m)
                if tried[m] <= tol:
                    return m, tried
    return oracle, tried


def full_nuts_seconds(name, problem) -> dict:
    """Full-data sampling with the settings used on the coresets (2 chains x (500 + 1000)): the first call in
    this process (compilation included) and a second one (warm)."""
    out = {"problem": name}
    for label, seed in (("first_s", 7), ("warm_s", 8)):
        t0 = time.perf_counter()
        models.posterior_draws(problem, jax.random.key(seed))
        out[label] = time.perf_counter() - t0
    return out


def route_seconds(row) -> float:
    """The automatic size plus NUTS on its coreset (what replaces full-data NUTS)."""
    return row["seconds"] + row["sample_seconds"] if row.get("sample_seconds") is not None else None


def same_run(row, nuts: dict = None) -> bool:
    """Whether the row's route can be set against full NUTS: both timed, by the same run (commit)."""
    ref = (nuts or {}).get(row["problem"])
    return bool(ref) and route_seconds(row) is not None and row.get("commit") == ref.get("commit")


def summarise(rows: list, nuts: dict = None) -> dict:
    scored = [r for r in rows if r["kl_floor"] <= r["tol"] / 3]
    trusted = [r for r in scored if r["verdict"] in ("good", "usable") and r["reached"]]
    within = [r for r in scored if r["oracle"] is not None]
    out = {"cells": len(rows), "resolved_cells": len(scored),
            "trusted_and_within_3x_tol": f"{sum(r['kl'] <= 3 * r['tol'] for r in trusted)}/{len(trusted)}",
            "size_at_most_2x_oracle": f"{sum(r['size'] <= 2 * r['oracle'] for r in within)}/{len(within)}",
            "median_seconds": float(np.median([r["seconds"] for r in rows])) if rows else None,
            "warned_when_unreached": f"{sum(r['warned'] for r in rows if not r['reached'])}/"
                                     f"{sum(not r['reached'] for r in rows)}"}
    timed = [r for r in rows if same_run(r, nuts)]
    if timed:
        warm = [route_seconds(r) / nuts[r["problem"]]["warm_s"] for r in timed if not r.get("first_in_process")]
        first = [route_seconds(r) / nuts[r["problem"]]["first_s"] for r in timed if r.get("first_in_process")]
        out["route_over_full_nuts_warm_median"] = float(np.median(warm)) if warm else None
        out["route_over_full_nuts_first_median"] = float(np.median(first)) if first else None
        out["timed_cells"] = len(timed)
    return out


def plot(rows, out_dir, stem):
    problems = sorted({r["problem"] for r in rows})
    if not problems:
        return
    fig, axes = common.figure(1, len(problems), size=(3.2, 3.0))
    for ax, p in zip(axes[0], problems):
        for i, r in enumerate([r for r in rows if r["problem"] == p and r["trial"] == 0]):
            xs = sorted(int(m) for m in r["oracle_path"])
            ax.plot(xs, [max(r["oracle_path"][m] if m in r["oracle_path"] else r["oracle_path"][str(m)], 1e-6)
                         for m in xs], ".-", color=f"C{i}", ms=3, label=f"tol {r['tol']}")
            ax.plot([q["size"] for q in r["path"]], [max(q["kl"], 1e-6) for q in r["path"]], "x", color=f"C{i}")
            ax.axhline(r["tol"], color=f"C{i}", ls=":", lw=0.8)
        ax.set_xscale("log"), ax.set_yscale("log"), ax.set_title(p, fontsize=9), ax.set_xlabel("M")
    axes[0][0].set_ylabel("KL (dots: measured; x: certificate on the path)")
    axes[0][0].legend(fontsize=6)
    common.save_figure(fig, out_dir, stem)


def no_compression_case() -> dict:
    """Logistic regression with D = 50 on N = 500 rows: no coreset far below N can match the posterior.

    Without a limit the search ends at all N rows (exact, nothing compressed); with the limit N / 2 no size
    reaches tol, and the call warns with the KL it reached."""
    key = jax.random.key(3)
    theta = np.random.default_rng(3).normal(0.0, 3.0 / np.sqrt(50), 50)  # X theta with sd about 3
    ds = cj.data.synthetic_logistic(key, 500, theta=tuple(theta))
    out = {"N": 500, "D": 50, "tol": 0.01}
    for label, limit in (("no_limit", None), ("limit_N_over_2", 250)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cs = cj.coreset(cj.models.logistic_regression(), ds.train, size=limit, key=key, tol=0.01)
        out[label] = {"limit": limit, "size": cs.capacity, "points": cs.num_points,
                      "verdict": cs.certificate.verdict, "cert_kl": float(cs.certificate.kl),
                      "path": cs.info["path"],
                      "warning": unreached_warning(caught)}
    return out


def ledger(path=LEDGER) -> list:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def append(path, row) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(common.jsonable(row)) + "\n")


def seed_ledgers(path: str) -> None:
    """Write a committed result's runs and full-NUTS times into empty ledgers (a fresh checkout has none), so
    that new cells join the old ones in the next auto_size.json."""
    with open(path) as f:
        result = json.load(f)
    for ledger_path, rows in ((LEDGER, result.get("runs", [])), (NUTS_LEDGER, list(result.get("full_nuts", {}).values()))):
        if ledger(ledger_path):
            raise SystemExit(f"--resume: {ledger_path} is not empty; remove it or leave out --resume")
        for row in rows:
            append(ledger_path, row)


def main(argv=None, *, quick=None, out_dir=None):
    def extra(p):
        p.add_argument("--problems", nargs="+", default=list(PROBLEMS))
        p.add_argument("--tols", nargs="+", type=float, default=list(TOLS))
        p.add_argument("--report", action="store_true")
        p.add_argument("--oracle-scan", choices=("up", "down"), default="up",
                       help="how the oracle's grid is scanned (oracle_scan); 'down' for D = 50")
        p.add_argument("--data-dir", default=common.DATA_DIR)
        p.add_argument("--kl-measure", choices=("two_moment", "bridge"), default="two_moment",
                       help="the measured KL where the posterior is not closed form (measured_kl)")
        p.add_argument("--resume", default=None, metavar="JSON",
                       help="start the (empty) ledgers from the runs and full-NUTS times of this result file")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    if args.quick:
        name = "gaussian_location"
        problem = models.load_problem(name, args.data_dir)
        rows = [run_cell(name, problem, full_reference(name, problem), 1.0, 0)]
        result = {"environment": common.environment(), "summary": summarise(rows), "runs": rows}
        common.write_json(result, args.out, "auto_size_quick")
        return result
    if args.resume:
        seed_ledgers(args.resume)
    if not args.report:
        done = {(r["problem"], r["tol"], r["trial"]) for r in ledger()}
        commit = common.environment()["git_commit"]
        timed = {r["problem"] for r in ledger(NUTS_LEDGER)}
        for name in args.problems:
            problem = models.load_problem(name, args.data_dir)
            ref = full_reference(name, problem)
            first = True  # the first cell of a problem in this process compiles its programs
            for tol in args.tols:
                for trial in range(args.trials or 3):
                    if (name, tol, trial) in done:
                        continue
                    row = dict(run_cell(name, problem, ref, tol, trial, scan=args.oracle_scan,
                                        measure=args.kl_measure), commit=commit, first_in_process=first)
                    first = False
                    append(LEDGER, row)
                    print(f"{name} tol {tol} t{trial}: size {row['size']} (oracle {row['oracle']}), KL {row['kl']:.3g} "
                          f"(cert {row['cert_kl']:.3g}, {row['verdict']}), {row['seconds']:.1f} s", flush=True)
            if name not in timed:
                append(NUTS_LEDGER, dict(full_nuts_seconds(name, problem), commit=commit))
    rows = ledger()
    nuts = {r["problem"]: r for r in ledger(NUTS_LEDGER)}
    result = {"environment": common.environment(), "summary": summarise(rows, nuts), "full_nuts": nuts,
              "no_compression": no_compression_case(), "runs": rows}
    common.write_json(result, args.out, "auto_size")
    plot(rows, args.out, "auto_size")
    return result


if __name__ == "__main__":
    main()
