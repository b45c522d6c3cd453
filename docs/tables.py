"""Markdown tables from benchmarks/results/*.json, written into marked regions of the documentation.

A region is the text between `<!-- table:NAME -->` and `<!-- /table:NAME -->` in README.md, docs/**/*.md or
benchmarks/README.md; NAME is one of `TABLES`. Each table is generated from one results file and ends with
a line saying what was measured where: the machine and date the JSON records, and, outside README.md, the
commit it records (README.md carries no commit hashes).

    python docs/tables.py            # rewrite every region from the JSON files
    python docs/tables.py --check    # exit 1 if a committed region differs from what the JSON gives
    python docs/tables.py --list     # the tables, their JSON files, and where each region is

Re-run it after a benchmark writes new results (e.g. `python benchmarks/models.py` rewrites
results/models.json; the `models` table follows).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import Callable

HERE = os.path.dirname(os.path.abspath(__file__))       # docs/
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")
RESULTS = os.path.join(BENCHMARKS, "results")
REGION = re.compile(r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table:(?P=name) -->)", re.S)


def _load(stem: str) -> dict:
    with open(os.path.join(RESULTS, stem + ".json"), encoding="utf-8") as f:
        return json.load(f)


def _fmt(x, digits: int = 3) -> str:
    """A number for a table: significant digits, thousands separators for large values, '–' for none."""
    if x is None:
        return "–"
    x = float(x)
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) < 0.01:
        return f"{x:.{max(digits - 1, 1)}g}"
    return f"{x:.{digits}g}"


def _seconds(x) -> str:
    return "–" if x is None else (f"{x:.2f} s" if x < 10 else f"{x:.1f} s")


def provenance(data: dict, stem: str, with_commit: bool) -> str:
    """The line under a table: the results file, the machine, the date and (outside README.md) the commit."""
    env = data.get("environment", {})
    backend = env.get("backend") or "an unrecorded device"
    if backend == "cpu":
        machine = f"CPU, {env.get('cpu_count', '?')} cores"
    else:
        machine = f"{env.get('device_kind') or backend} x {env.get('device_count', 1)}"
    date = (env.get("date_utc") or "")[:10] or "an unrecorded date"
    commit = f" at commit `{env['git_commit']}`" if with_commit and env.get("git_commit") else " at one commit"
    note = f"; {env['note']}" if env.get("note") else ""
    return (f"From `benchmarks/results/{stem}.json`, measured{commit} on {date}: {machine}, "
            f"JAX {env.get('jax', '?')}{note}.")


# ---------------------------------------------------------------- the tables


def table_cold_start(with_commit: bool) -> str:
    """First calls in fresh processes, empty and warm compilation cache (benchmarks/cold_start.py)."""
    data = _load("cold_start")
    s, p = data["summary"], data["problem"]
    # The README's quickstart and Coreset MCMC rows are left out: both have changed since (the quickstart
    # now sizes its coreset; Coreset MCMC runs the published algorithm by default).
    rows = [("`cj.coreset`, GIGA", "coreset:giga", True),
            ("`cj.coreset`, A-IHT II", "coreset:iht2", True),
            ("`cj.sample`, NUTS", "sample:nuts", True),
            ("`cj.sample`, MALA", "sample:mala", True)]
    lines = ["| call | empty cache: first call | compilations | warm cache: first call | second call |",
             "|---|---|---|---|---|"]
    for label, row, is_call in rows:
        empty, warm = s.get(row + "|empty"), s.get(row + "|warm")
        if empty is None:
            continue
        key = "first_s" if is_call else "process_s"
        lines.append(f"| {label} | {_seconds(empty.get(key))} | {_fmt(empty.get('compiles')) if is_call else '–'} | "
                     f"{_seconds(warm.get(key)) if warm else '–'} | "
                     f"{_seconds(empty.get('second_s')) if 'second_s' in empty else '–'} |")
    if "numpyro" in s:
        n = s["numpyro"]
        lines.append(f"| NumPyro NUTS on all {p['N']} rows (no cache) | {_seconds(n['first_s'])} | "
                     f"{_fmt(n.get('compiles'))} | – | {_seconds(n.get('second_s'))} |")
    lines += ["", f"Logistic regression, N = {p['N']}, D = {p['D']}, M = {p['M']} ({p['data']}); sampling "
              f"{p['sample']}; medians of {data['repeats']} repeats, each in a fresh process. "
              + provenance(data, "cold_start", with_commit)]
    return "\n".join(lines)


def table_certify(with_commit: bool) -> str:
    """How well the certificate predicts the true error (benchmarks/certify.py)."""
    data = _load("certify")
    sm, t = data["summary"], data["timing"]
    closed, mcmc = sm["kl_closed_form"], sm["kl_mcmc"]
    flags = sm["verdict_flags_w1_over_3"]
    lines = ["| question | answer |", "|---|---|",
             f"| rank correlation of the KL estimate with the exact KL (closed-form problems, {closed['rows']} "
             f"coresets) | {closed['spearman']:.3f} |",
             f"| estimates within 2x of the exact KL, where k-hat < 0.7 | "
             f"{closed['estimate_within_2x_where_khat_below_0.7']} of {closed['rows_with_khat_below_0.7']} |",
             f"| rank correlation with the moment KL from full-data NUTS ({mcmc['rows']} coresets) | "
             f"{mcmc['spearman']:.3f} |",
             f"| coresets whose W1 to the full posterior exceeds 3x the Monte Carlo floor, flagged by the verdict | "
             f"{flags['bad_and_flagged']} of {flags['bad_and_flagged'] + flags['bad_missed']} |",
             f"| good coresets (W1 under 3x the floor) flagged all the same | "
             f"{flags['good_but_flagged']} of {flags['good_but_flagged'] + flags['good_and_passed']} |",
             f"| cost at N = {t['N']:,}, M = {t['M']}, {t['draws']} draws: float64 / float32 pass | "
             f"{_seconds(t['certify_float64_s'])} / {_seconds(t['certify_float32_s'])} |",
             f"| ... against building the coreset ({t['method']}) | {_seconds(t['construction_s'])} |",
             "", provenance(data, "certify", with_commit)]
    return "\n".join(lines)


# The methods of the models-suite table (benchmarks/models.py's labels), in column order; a column appears
# when any cell has it. Other labels in the JSON (ablations such as caps or unbudgeted refinements) are left
# out of the table.
MODEL_METHODS = ("uniform", "giga", "iht2", "omp", "omp+refine", "omp+refine_qn", "iht2+refine", "coreset_mcmc",
                 "quasi_newton")


def table_models(with_commit: bool, stem: str = "models") -> str:
    """Median z2 (the metric of benchmarks/models.py) per problem, M and method, from the JSON's "table"."""
    data = _load(stem)
    table = data["table"]
    present = {m for e in table for m in e["median_z2"]}
    methods = [m for m in MODEL_METHODS if m in present]
    lines = ["| problem | M | " + " | ".join(f"`{m}`" for m in methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for e in sorted(table, key=lambda e: (e["problem"], e["M"])):
        med, trials = e["median_z2"], e.get("trials", {})
        best = min((med[m] for m in methods if med.get(m) is not None), default=None)

        def cell(m):
            if med.get(m) is None:
                return "–"
            text = _fmt(med[m])
            if best is not None and text == _fmt(best):
                text = f"**{text}**"
            if trials.get(m, 3) < 3:
                text += f" ({trials[m]})"
            return text
        lines.append(f"| {e['problem']} | {e['M']} | " + " | ".join(cell(m) for m in methods) + " |")
    reductions = data.get("reductions", {})
    note = "; ".join(str(reductions[k]) for k in ("trials", "metric_draws") if k in reductions)
    lines += ["", "Median z2 over trials (lower is better; bold: the best in its row; a number in brackets: "
              "trials that finished, when fewer than 3)" + (f"; {note}" if note else "") + ". "
              + provenance(data, stem, with_commit)]
    return "\n".join(lines)


def table_vs_peers(with_commit: bool, stem: str = "vs_peers", note: str = "") -> str:
    """Time to a posterior from a fresh process against NumPyro's NUTS and HMCECS (benchmarks/vs_peers.py)."""
    data = _load(stem)
    lines = [data["table_markdown"], ""]
    for t in data.get("targets", {}).get("checks", []) if isinstance(data.get("targets"), dict) else []:
        lines.append(f"- {t}")
    return "\n".join(lines + ["Cold: a fresh process with empty compilation caches; warm: a second identical "
                               "call in that process. " + note + provenance(data, stem, with_commit)])


H200_FLOAT32 = ("Every contender ran with `JAX_DEFAULT_MATMUL_PRECISION=float32` (full float32 matrix products; our "
                "route uses them in any case). ")


def table_device_pipeline(with_commit: bool, stem: str = "device_gpu") -> str:
    """`cj.coreset` at N = 10^6 and 10^7 on an accelerator, first and second call (benchmarks/device.py)."""
    data = _load(stem)
    lines = ["| N | first call (compilation included) | second call | V (N x J float32) |", "|---|---|---|---|"]
    for r in data.get("pipeline", []):
        if "first_s" not in r:
            lines.append(f"| {r['N']:,} | skipped: {r['skipped']} | | |")
            continue
        lines.append(f"| {r['N']:,} | {_seconds(r['first_s'])} | {_seconds(r['second_s'])} "
                     f"| {r['N'] * r['J'] * 4 / 2**30:.1f} GiB |")
    cfg = data["config"]
    lines += ["", f"`cj.coreset(model, data, size={cfg['M']}, method=\"giga\", num_features={cfg['J']})` on synthetic "
              "logistic regression (the Laplace fit, the Fisher projection and GIGA), data already on the device. "
              + provenance(data, stem, with_commit)]
    return "\n".join(lines)


def table_float32_chains(with_commit: bool) -> str:
    """NUTS on an OMP coreset in float32 and float64 (benchmarks/investigations/float32_chains.py)."""
    data = _load("float32_chains")
    lines = ["| chains in | leapfrog steps per draw | adapted step size | seconds per call | "
             "max abs z against full NUTS |", "|---|---|---|---|---|"]
    span = lambda lo, hi, d=3: _fmt(lo, d) if _fmt(lo, d) == _fmt(hi, d) else f"{_fmt(lo, d)}–{_fmt(hi, d)}"  # noqa: E731
    for name in ("float32", "float64"):
        warm = [r for r in data["runs"] if r["dtype"] == name and not r["compiling_call"]]
        steps = [s for r in warm for s in r["leapfrog_steps"]]
        sizes = [s for r in warm for s in r["step_size"]]
        zs = [r["max_abs_z_against_full_nuts"] for r in warm]
        lines.append(f"| {name} | {span(min(steps), max(steps))} | {span(min(sizes), max(sizes), 2)} "
                     f"| {_fmt(data[name + '_median_seconds'], 2)} (median of {len(warm)}) "
                     f"| {span(min(zs), max(zs), 2)} |")
    lines += ["", f"Logistic regression (D = {data['D']}, N = {data['N']:,}) as a NumPyro model; an OMP coreset "
              f"(M = {data['M']}, {data['points']} points, weights up to {data['max_weight']:,.0f}); BlackJAX "
              f"NUTS with window adaptation, {data['chains']} chains x ({data['warmup']} + {data['draws']}); "
              "compiled calls. " + provenance(data, "float32_chains", with_commit)]
    return "\n".join(lines)


def table_coreset_mcmc_scale(with_commit: bool, stem: str = "coreset_mcmc_scale") -> str:
    """Coreset MCMC's time per training iteration against N (benchmarks/coreset_mcmc_scale.py)."""
    data = _load(stem)
    ms = sorted({r["M"] for r in data["rows"]})
    lines = ["| N | " + " | ".join(f"ms per iteration, M = {m}" for m in ms) + " |",
             "|---|" + "---|" * len(ms)]
    for n in sorted({r["N"] for r in data["rows"]}):
        at = {r["M"]: r for r in data["rows"] if r["N"] == n}
        lines.append(f"| {n:,} | " + " | ".join(_fmt(at[m]["per_iteration_ms"]) if m in at else "–" for m in ms)
                     + " |")
    spread = data["max_over_min_per_iteration"]
    lines += ["", "Largest over smallest time per iteration across N: "
              + ", ".join(f"{_fmt(spread[str(m)] if str(m) in spread else spread[m])}x at M = {m}" for m in ms) + "."]
    target = data.get("target_at_1e5")
    if target:
        proj = target["published_budget_projected_s"]
        ratio = target["ratio_to_full_nuts"]
        lines.append("At N = 100,000 the authors' 200,000 iterations project to "
                     + ", ".join(f"{_fmt(proj[k])} s (M = {k}, {_fmt(ratio[k])}x)" for k in proj)
                     + f" against {_fmt(target['full_nuts_warm_s'])} s for warm full-data NUTS "
                     "(2 chains x (500 + 500)).")
    r0 = data["rows"][0]
    lines.append(f"The difference of two warm calls with T = {r0['T1']:,} and {r0['T2']:,} iterations, over "
                 f"T2 - T1 (hot start off; medians). " + provenance(data, stem, with_commit))
    return "\n".join(lines)


def table_hot_dog_weights(with_commit: bool) -> str:
    """Published Coreset MCMC's weights during training, slice sampler against NUTS
    (benchmarks/investigations/hot_dog_weights.py)."""
    data = _load("hot_dog_weights")
    lines = ["| problem | one-step signal / noise at w0 | kernel | weight sum / N at checkpoints | largest weight / (N/M), end "
             "| z2 at w0 | z2 trained |", "|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        grad = row["gradient_at_start"]
        for kernel, t in row["training"].items():
            sums = ", ".join(_fmt(v) for v in t["weight_sum_over_n"] + [t["final"]["weight_sum_over_n"]])
            lines.append(f"| {row['problem']} | {_fmt(grad['median_signal_to_noise'], 2)} | {kernel} | {sums} "
                         f"| {_fmt(t['final']['max_weight_over_start'])} | {_fmt(t['z2_start_own_draws'])} "
                         f"| {_fmt(t['z2_own_draws'])} |")
    t0 = next(iter(data["rows"][0]["training"].values()))
    lines += ["", f"M = {data['settings']['M']}, {data['settings']['iters']:,} iterations (the authors run 200,000), "
              "published settings otherwise (kernel nuts: NUTS with 500 step-size adaptation steps at w0 in place of "
              "the authors' slice sampler); the sums are at " + ", ".join(f"{c:,}" for c in t0["checkpoints"])
              + " training iterations and at the end. Signal / noise: the median over weights of |exact gradient| "
              f"over the sd of one iteration's estimate ({data['settings']['draws']:,} NUTS draws of pi_w0, "
              f"{data['settings']['repeats']} estimates). z2 from the method's own draws (K = 2 chains x 1,000) "
              "at the start and with the trained weights. "
              + (f"Rows measured at commits {', '.join(f'`{c}`' for c in data['commits'])}; the latest: "
                 if with_commit and len(data.get("commits") or []) > 1 else "")
              + provenance(data, "hot_dog_weights", with_commit)]
    return "\n".join(lines)


def table_auto_size(with_commit: bool) -> str:
    """The automatic size against the oracle size, per problem and tol over the trials (benchmarks/auto_size.py)."""
    data = _load("auto_size")
    nuts = data.get("full_nuts") or {}
    lines = ["| problem | tol | sizes chosen | oracle sizes | verdicts | certificate KL | measured KL, max (floor) "
             "| sizes tried | seconds | with NUTS / full NUTS |", "|---|---|---|---|---|---|---|---|---|---|"]
    cells = sorted({(r["problem"], r["tol"]) for r in data["runs"]}, key=lambda c: (c[0], -c[1]))
    for problem, tol in cells:
        rs = sorted((r for r in data["runs"] if r["problem"] == problem and r["tol"] == tol), key=lambda r: r["trial"])
        paths = sorted({", ".join(str(p["size"]) for p in r["path"]) for r in rs})
        ratios = []
        for r in rs:  # the route (search + NUTS on its coreset) over full NUTS timed in the same process
            ref = nuts.get(problem)
            if ref and r.get("sample_seconds") is not None and r.get("commit") == ref.get("commit"):
                full = ref["first_s"] if r.get("first_in_process") else ref["warm_s"]
                ratios.append((r["seconds"] + r["sample_seconds"]) / full)
        lines.append(f"| {problem} | {tol:g} | {', '.join(str(r['size']) for r in rs)} "
                     f"| {', '.join(str(r['oracle']) if r['oracle'] is not None else '–' for r in rs)} "
                     f"| {', '.join(r['verdict'] for r in rs)} | {', '.join(_fmt(r['cert_kl'], 2) for r in rs)} "
                     f"| {_fmt(max(r['kl'] for r in rs))} ({_fmt(max(r['kl_floor'] for r in rs))})"
                     f"{' bridge' if any(r.get('kl_measure') == 'bridge' for r in rs) else ''} | {'; '.join(paths)} "
                     f"| {', '.join(_fmt(r['seconds'], 2) for r in rs)} "
                     f"| {', '.join(_fmt(x, 2) for x in ratios) if ratios else '–'} |")
    summ = data["summary"]
    lines += ["", f"Cells: {summ['cells']} runs ({summ['resolved_cells']} where the measured KL's own floor is below "
              f"tol / 3). Trusted (good or usable, tol reached) with measured KL at most 3 tol: "
              f"{summ['trusted_and_within_3x_tol']}. Chosen size at most 2x the oracle's: "
              f"{summ['size_at_most_2x_oracle']}. Warned where no size reached tol: {summ['warned_when_unreached']}."]
    if summ.get("timed_cells"):
        lines.append(f"The search plus NUTS on its coreset over full-data NUTS (2 chains x (500 + 1000), the same "
                     f"settings, timed in the same run): median {_fmt(summ['route_over_full_nuts_warm_median'], 2)}"
                     f"x warm, {_fmt(summ['route_over_full_nuts_first_median'], 2)}x for a problem's first cell "
                     f"against full NUTS's first call (both compiling), over {summ['timed_cells']} timed runs. "
                     "Full NUTS, first / warm call: " + ", ".join(
                         f"{p} {_fmt(v['first_s'], 2)} / {_fmt(v['warm_s'], 2)} s" for p, v in sorted(nuts.items()))
                     + ".")
    nc = data.get("no_compression")
    if nc:
        free, capped = nc["no_limit"], nc["limit_N_over_2"]
        lines.append(f"No compression possible (logistic regression, D = {nc['D']}, N = {nc['N']}, tol {nc['tol']:g}): "
                     f"with no limit the search ends at size {free['size']} (all rows; certificate KL "
                     f"{_fmt(free['cert_kl'])}, {free['verdict']}); with the limit {capped['limit']} it returns size "
                     f"{capped['size']} (KL {_fmt(capped['cert_kl'])}, {capped['verdict']}) and "
                     + ("warns: \"" + capped["warning"].split(";")[0] + "\"." if capped["warning"] else "does not warn."))
    down_rows = [r for r in data["runs"] if r.get("oracle_scan") == "down"]
    down = [f"{p} (tol {', '.join(f'{t:g}' for t in sorted({r['tol'] for r in down_rows if r['problem'] == p}, reverse=True))})"
            for p in sorted({r["problem"] for r in down_rows})]
    if down:
        lines.append(f"The oracle for {', '.join(down)} scanned the grid downwards from the chosen size (NUTS on "
                     "coresets of fewer points than D ran for minutes each); that is the same oracle when the KL "
                     "falls with M along the grid.")
    commits = sorted({r.get("commit") for r in data["runs"] if r.get("commit")})
    lines.append("Each cell lists its trials (seeds) in order; the last column lists the trials that recorded the time "
                 "of NUTS on their coreset, and a problem's first of them compiled its programs. The measured KL is exact for Gaussian location, else "
                 "the two-moment KL of 2 x 1000 NUTS draws against the full-data reference"
                 + ("; cells marked 'bridge' use the bridge-sampling KL (`cj.metrics.bridge_kl`) of those draws against "
                    "the reference's, whose floor is the difference between its estimates against the two reference runs"
                    if any(r.get("kl_measure") == "bridge" for r in data["runs"]) else "") + ". "
                 + (f"The runs' own commits: {', '.join(f'`{c}`' for c in commits)}. " if with_commit and commits
                    else "")
                 + provenance(data, "auto_size", with_commit))
    return "\n".join(lines)


def table_auto_size_recheck(with_commit: bool) -> str:
    """The automatic size searched again on auto_size.json's cells with later code
    (investigations/auto_size_recheck.py)."""
    data = _load("auto_size_recheck")
    lines = ["| run | cells (resolved) | trusted with measured KL <= 3 tol | size <= 2x oracle | warned where tol "
             "was not reached |", "|---|---|---|---|---|"]
    for label, summ in (("stored (auto_size.json)", data["stored_summary_same_cells"]),
                        ("again, later code", data["summary"])):
        lines.append(f"| {label} | {summ['cells']} ({summ['resolved_cells']}) | {summ['trusted_and_within_3x_tol']} "
                     f"| {summ['size_at_most_2x_oracle']} | {summ['warned_when_unreached']} |")
    changed = [r for r in data["runs"] if r["size"] != r["stored"]["size"]]
    moved = "; ".join(f"{r['problem']} tol {r['tol']:g} seed {r['trial']}: {r['stored']['size']} -> {r['size']} "
                      f"(oracle {r['oracle'] if r['oracle'] is not None else '–'}, measured KL {_fmt(r['kl'])})"
                      for r in changed)
    return "\n".join(lines + ["", f"The same cells, seeds and method; the stored oracles. Chosen sizes that "
                              f"changed ({len(changed)} of {len(data['runs'])}): {moved or 'none'}. "
                              + provenance(data, "auto_size_recheck", with_commit)])


def table_sparse_vi_cost(with_commit: bool) -> str:
    """The published Sparse VI's construction time and certificate beside OMP's (investigations/sparse_vi_cost.py)."""
    data = _load("sparse_vi_cost")
    lines = ["| problem | N | M | `sparse_vi` seconds | its certificate KL (verdict) | `omp` seconds | "
             "its certificate KL (verdict) |", "|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        if "sparse_vi" not in r:
            lines.append(f"| {r['problem']} | – | {r['size']} | over {r['cap_s']:.0f} s | – | – | – |")
            continue
        svi, omp = r["sparse_vi"], r["omp"]
        lines.append(f"| {r['problem']} | {r['N']:,} | {r['size']} | {_seconds(svi['seconds'])} | "
                     f"{_fmt(svi['kl'])} ({svi['verdict']}) | {_seconds(omp['seconds'])} | "
                     f"{_fmt(omp['kl'])} ({omp['verdict']}) |")
    return "\n".join(lines + ["", "Each row one fresh process (compilation included): `cj.coreset(model, data, size=M, "
                              "method=...)` with the defaults (Sparse VI: 100 draws of pi_w per step, each from a "
                              "NUTS chain of 100 + 100 steps, 100 weight iterations per point, step 1 / t), then "
                              "`cj.certify` on 2 x (500 + 500) NUTS draws of the coreset posterior; OMP ran second, in "
                              "the same process. "
                              + provenance(data, "sparse_vi_cost", with_commit)])


def table_screen_check(with_commit: bool) -> str:
    """The automatic size's screen against the full pass, per size and per search (investigations/screen_check.py)."""
    data = _load("screen_check")
    lines = ["| problem | N | M | points | full-pass KL | screened KL | screen error sd (estimated) | decides at "
             "tol 0.1 | as the full pass | full pass s | screen s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell in data["cells"]:
        if "skipped" in cell:
            lines.append(f"| {cell['model']} | – | – | – | skipped: {cell['skipped']} | – | – | – | – | – | – |")
            continue
        for r in cell["sizes"]:
            decides = r["decides_at_0.1"]
            lines.append(f"| {cell['model']} | {cell['N']:,} | {r['size']} | {r['points']} | {_fmt(r['full_kl'])} | "
                         f"{_fmt(r['screen_kl'])} | {_fmt(r['noise_true'], 2)} ({_fmt(r['noise_estimated'], 2)}) | "
                         f"{'yes' if decides else 'no: full pass'} | "
                         f"{('yes' if r['agrees_at_0.1'] else '**no**') if decides else '–'} | "
                         f"{r['full_s']:.2f} | {r['screen_s']:.2f} |")
    lines += ["", "| problem | N | search with the screen: s, sizes (screened) -> returned | full passes only: s, "
              "sizes -> returned | same coreset | time ratio |", "|---|---|---|---|---|---|"]
    for cell in data["cells"]:
        if "skipped" in cell or cell["search"] is None:
            continue
        a, b = cell["search"]["screened"], cell["search"]["full"]
        lines.append(f"| {cell['model']} | {cell['N']:,} | {a['seconds']:.2f}, {a['sizes']} ({a['screened_sizes']}) "
                     f"-> {a['returned']} | {b['seconds']:.2f}, {b['sizes']} -> {b['returned']} | "
                     f"{'yes' if cell['search']['same_coreset'] else '**no**'} | {cell['search']['ratio']:.2f}x |")
    summ = data["summary"]
    return "\n".join(lines + ["", f"Per size: OMP at M, 2 x (500 + 500) NUTS draws of its posterior, then `cj.certify` "
                              "(the full pass, precision \"auto\") and the screen (16,384 rows) on the same draws, "
                              "second calls timed; the screen's error is the sd over the draws of its centred "
                              "difference from the full pass, its estimate from the spread of four groups of the subsample. The screen "
                              f"decided {summ['decided_at_1']} sizes at tol 1, {summ['decided_at_0.1']} at 0.1 and "
                              f"{summ['decided_at_0.01']} at 0.01, and where it decided it agreed with the full pass "
                              f"in {summ['agreed_at_1']}, {summ['agreed_at_0.1']} and {summ['agreed_at_0.01']} "
                              "(sizes it did not decide count as agreeing: they get the full pass). Searches: "
                              "`cj.coreset(..., tol=0.1)`, each way twice in one process, alternating, the second "
                              "calls timed. " + provenance(data, "screen_check", with_commit)])


def table_greedy_path(with_commit: bool) -> str:
    """The automatic size with OMP's greedy path against one OMP run per size (investigations/greedy_path.py)."""
    data = _load("greedy_path")
    lines = ["| N | variant | first call s (compiling s) | second call s | sizes tried | chosen size, KL |",
             "|---|---|---|---|---|---|"]
    for row in data["summary"]:
        n = row["N"]
        for variant in data["variants"]:
            rs = [r for r in data["runs"] if r["N"] == n and r["variant"] == variant]
            chosen = ", ".join(f"{r['size']} ({_fmt(r['kl'], 2)})" for r in rs)
            tried = "; ".join(", ".join(map(str, sizes)) for sizes in row[variant + "_sizes"])
            lines.append(f"| {n:,} | {variant.replace('_', ' ')} | {_fmt(row[variant + '_first_s'])} "
                         f"({_fmt(row[variant + '_compile_s'])}) | {_fmt(row[variant + '_second_s'])} "
                         f"| {tried} | {chosen} |")
    lines += ["", "Greedy path over one run per size, paired by repeat (median): " + "; ".join(
        f"N = {row['N']:,}: first call {_fmt(row['ratio_first_median'], 2)}x, second {_fmt(row['ratio_second_median'], 2)}x"
        for row in data["summary"]) + f". Medians over {max(r['repeat'] for r in data['runs']) + 1} fresh processes per "
        "cell, empty compilation caches. " + provenance(data, "greedy_path", with_commit)]
    return "\n".join(lines)


def _markdown_with_note(stem: str, note: str, with_commit: bool) -> str:
    """A results file's own `table_markdown`, then `note` and the provenance line."""
    data = _load(stem)
    return data["table_markdown"].rstrip("\n") + "\n\n" + note + provenance(data, stem, with_commit)


def table_cold_path_quality(with_commit: bool) -> str:
    """Coreset quality of the cheaper construction variants (investigations/cold_path.py --quality)."""
    data = _load("cold_path_quality")
    trials = max(r["trial"] for r in data["rows"]) + 1
    return _markdown_with_note(
        "cold_path_quality",
        f"OMP at M = {data['M']}, {trials} trials per row (medians; maxima in brackets); the coreset posterior is "
        "NUTS 2 x (500 + 1000) against full-data NUTS; z2 = mean_d (mu_hat_d - mu_d)^2 / sd_d^2; KL is the "
        "certificate's. ", with_commit)


def table_d50_features(with_commit: bool) -> str:
    """OMP coresets at D = 50 against the projection dimension J (investigations/d50_features.py)."""
    data = _load("d50_features")
    lines = ["| problem | J | M | points | construction | relative error | certificate KL | max abs z |",
             "|---|---|---|---|---|---|---|---|"]
    for c in data["cells"]:
        lines.append(f"| {c['problem']} | {c['J']:,} | {c['M']:,} | {c['points']:,} | {_seconds(c['build_s'])} "
                     f"| {_fmt(c['relative_error'], 2)} | {_fmt(c['kl'], 2)} ({c['verdict']}) | {_fmt(c['max_z'], 2)} |")
    refs = data["references"]
    draws = data["settings"]["draws"]
    n = data["cells"][0]["N"] if data["cells"] else 0
    lines += ["", f"N = {n:,} rows; OMP (`cj.coreset(..., method=\"omp\", num_features=J)`, first call), then "
              f"NUTS on the coreset and full-data NUTS, each {draws['num_chains']} x ({draws['num_warmup']} + "
              f"{draws['num_samples']}); max |z| of the posterior mean against full-data NUTS, whose own chain "
              "against chain z was " + ", ".join(f"{_fmt(r['chain_z'], 2)} ({k})" for k, r in refs.items())
              + ". " + provenance(data, "d50_features", with_commit)]
    return "\n".join(lines)


def table_candidate_rows(with_commit: bool) -> str:
    """OMP on candidate rows against every row (investigations/candidate_rows.py)."""
    data = _load("candidate_rows")
    trials = max(r["trial"] for r in data["runs"]) + 1
    return _markdown_with_note(
        "candidate_rows",
        f"OMP at M = {data['size']}, J = {data['num_features']}, {trials} trials per row (medians; the "
        "certificate KL's maximum in brackets); calls in one process, the second call timed again; relative "
        "error on every row's features; the certificate from 2 x (500 + 500) NUTS draws; max |z| of the "
        "posterior mean against the every-row coreset's draws of the same trial. ", with_commit)


def table_gpu_nuts(with_commit: bool) -> str:
    """NumPyro NUTS on all rows, stage by stage, on a GPU (investigations/gpu_stages.py)."""
    h100, h200 = _load("gpu_stages_h100"), _load("gpu_stages_h200")
    lines = ["| card | N | seed | stage | seconds | compile s | leapfrog steps per draw (mean, max) |",
             "|---|---|---|---|---|---|---|"]
    for key in sorted((k for k in h100 if k.startswith("nuts_")), key=lambda k: -int(k[5:])):
        for st in h100[key]["stages"]:
            if st["stage"] == "data":
                continue
            seconds = st.get("seconds", st.get("compile_s", 0) + st.get("first_s", 0))
            steps = f"{_fmt(st['mean_steps'])}, {st['max_steps']:,}" if "mean_steps" in st else "–"
            seed = "1" if st["stage"].startswith("mcmc") else "–"
            lines.append(f"| H100 | {int(key[5:]):,} | {seed} | `{st['stage']}` | {_fmt(seconds)} | "
                         f"{_fmt(st['log']['compile_s'])} | {steps} |")
    for key in sorted(k for k in h200 if k.startswith("seed_")):
        run = h200[key]
        done = run["stages"][0] if run["stages"] else None
        lines.append(f"| H200 | {int(h200['argv'][h200['argv'].index('--ns') + 1]):,} | {key[5:]} | cold "
                     f"`mcmc_full` | {_fmt(done['seconds']) if done else run['status']} | – | "
                     f"{_fmt(sum(done['mean_steps_per_chain']) / 2) + ', ' + str(done['max_steps']) if done else '–'} |")
    return "\n".join(lines + ["", "2 chains, vectorized, 400 + 400 for `mcmc_full` and 20 + 20 for `mcmc_short`; "
                              "the H100 stages ran in one process per N in this order (so `mcmc_full` reuses "
                              "nothing but what `mcmc_short` compiled), the H200 runs one fresh process per seed. "
                              + provenance(h100, "gpu_stages_h100", with_commit) + " "
                              + provenance(h200, "gpu_stages_h200", with_commit)])


def table_gpu_loop(with_commit: bool) -> str:
    """Coreset MCMC's compiled loop and a random-row gather loop alone, at two N on a GPU."""
    h100, h200 = _load("gpu_stages_h100"), _load("gpu_stages_h200")
    lines = ["| card | program | N | ms per iteration | N-row instructions in the compiled program (in loop bodies) |",
             "|---|---|---|---|---|"]
    for st in h100["loop"]["stages"]:
        lines.append(f"| H100 | Coreset MCMC as published, M = 100 | {st['N']:,} | {_fmt(st['per_iteration_ms'])} | "
                     f"{st['n_sized']} ({st['n_sized_in_loop_bodies']}) |")
    for st in h200["gather"]["stages"]:
        order = st["stage"].rsplit("_", 1)[1]
        lines.append(f"| H200 | 200 {order} rows gathered, a dot and a sum | {st['N']:,} | "
                     f"{_fmt(st['per_iteration_ms'])} | – |")
    return "\n".join(lines + ["", "Coreset MCMC: the difference of two warm calls with T = 500 and 1,500 iterations "
                              "over T2 - T1 (medians of 2); the gather loop: 2,000 iterations in one compiled "
                              "`fori_loop`, median of 3 calls. " + provenance(h100, "gpu_stages_h100", with_commit)
                              + " " + provenance(h200, "gpu_stages_h200", with_commit)])


def table_gpu_nuts_precision(with_commit: bool) -> str:
    """NumPyro's NUTS at N = 10^6 on an H200, cold, with JAX's default (TF32) and full float32 products."""
    runs = [("JAX's default (TF32)", "gpu_stages_h200"), ("JAX's default (TF32)", "gpu_stages_h200_tf32"),
            ("full float32", "gpu_stages_h200_f32")]
    lines = ["| matrix products | seed | seconds (cold process) | leapfrog steps per draw, mean (max) | results file |",
             "|---|---|---|---|---|"]
    for products, stem in runs:
        data = _load(stem)
        for key in sorted(k for k in data if k.startswith("seed_")):
            run = data[key]
            done = run["stages"][0] if run["stages"] else None  # none: stopped at its time limit
            steps = f"{_fmt(sum(done['mean_steps_per_chain']) / 2)} ({done['max_steps']})" if done else "–"
            lines.append(f"| {products} | {key[5:]} | {_fmt(done['process_s']) if done else run['status']} | "
                         f"{steps} | `{stem}` |")
    return "\n".join(lines + ["", "vs_peers.py's logistic regression, D = 10, N = 1,000,000; NumPyro NUTS, 2 chains "
                              "vectorized, 400 + 400; one fresh process per seed. "
                              + " ".join(provenance(_load(stem), stem, with_commit) for stem in dict.fromkeys(s for _, s in runs))])


def table_sample_placement(with_commit: bool) -> str:
    """A coreset's chains on the GPU, on the host, and where `cj.sample` puts them (investigations/sample_placement.py)."""
    data = _load("sample_placement_h200")
    lines = ["| M | GPU: first call s | host: first call s | default: first call s | GPU: compiled s | "
             "host: compiled s | default: compiled s | placed by default on |", "|---|---|---|---|---|---|---|---|"]
    for r in data["rows"]:
        med = r["medians"]
        where = "host" if r["M"] <= data["host_chain_rows"] else "GPU"  # the rule when this ran
        lines.append(f"| {r['M']:,} | " + " | ".join(_fmt(med[v]["first_s"], 2) for v in ("gpu", "cpu", "auto"))
                     + " | " + " | ".join(_fmt(med[v]["second_s"], 2) for v in ("gpu", "cpu", "auto"))
                     + f" | {where} |")
    return "\n".join(lines + ["", f"`cj.sample` on M rows of vs_peers' logistic regression (D = 10) weighted N / M, "
                              f"N = 10^6; NUTS, 2 chains x (400 + 400); each placement in a fresh process, "
                              f"{data['repeats']} repeat(s), alternating. GPU: the data and chains on the GPU; "
                              "host: the data and chains on the host CPU; default: the data on the GPU, the chains "
                              f"where `cj.sample` put them when this ran (the host up to {data['host_chain_rows']:,} "
                              "rows). "
                              + provenance(data, "sample_placement_h200", with_commit)])


def table_tf32_emulation(with_commit: bool) -> str:
    """TF32 rounding of X and theta, emulated in NumPy (investigations/tf32_emulation.py)."""
    data = _load("tf32_emulation")
    lines = ["| N | posterior sd (median) | TF32 grid / sd, median (max) | log-density error sd, nats | "
             "error range, nats | acceptance cap |", "|---|---|---|---|---|---|"]
    for r in data["rows"]:
        lines.append(f"| {r['N']:,} | {_fmt(r['posterior_sd_median'])} | {_fmt(r['grid_over_sd_median'], 2)} "
                     f"({_fmt(r['grid_over_sd_max'], 2)}) | {_fmt(r['error_spread_nats'], 2)} | "
                     f"{_fmt(r['error_range_nats'], 2)} | {_fmt(r['acceptance_cap'], 2)} |")
    return "\n".join(lines + ["", f"vs_peers.py's logistic regression, D = 10; {data['draws']} Laplace draws; "
                              "everything in float64 except X and theta rounded to TF32's 10 mantissa bits. "
                              + provenance(data, "tf32_emulation", with_commit)])


def table_certify_precision(with_commit: bool) -> str:
    """The certificate's pass in float64, float32 and "auto" (benchmarks/investigations/certify_precision.py)."""
    data = _load("certify_precision")
    lines = ["| problem | N | float64 s | float32 s | auto s | auto used | KL float64 | KL float32 | KL auto "
             "| float32 error of r (sd, max) | auto's error of r (max) | auto's error bound |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        if row.get("skipped"):
            continue
        a = row["auto"]
        lines.append(f"| {row['model']} | {row['N']:.0e} | {row['float64']['seconds']:.2f} | "
                     f"{row['float32']['seconds']:.2f} | {a['seconds']:.2f} | {a['used']} | {_fmt(row['float64']['kl'], 4)} "
                     f"| {_fmt(row['float32']['kl'], 4)} | {_fmt(a['kl'], 4)} | {_fmt(row['error_sd'], 2)}, "
                     f"{_fmt(row['error_max'], 2)} nat | {_fmt(a.get('error_max'), 2)} nat | "
                     f"{_fmt(a['error_bound'], 2)} nat |")
    lines += ["", "OMP coreset (M = 100 on 100,000 candidate rows), NUTS 2 x (400 + 400) draws, then `cj.certify` "
              "at each precision, the second (compiled) call timed. logistic10 and poisson10 are vs_peers' "
              "synthetic NumPyro models; biketrips_large and airportdelays_large are the real files tiled to N "
              "rows (each row repeated about N / N_file times) with the built-in Poisson regression. Errors are "
              "of the centred log ratios against float64's. " + provenance(data, "certify_precision", with_commit)]
    return "\n".join(lines)


def table_default_features(with_commit: bool) -> str:
    """J = 500 against the default rule's floor on the model suite (investigations/default_features.py)."""
    data = _load("default_features")
    trials = data["settings"]["trials"]
    return _markdown_with_note(
        "default_features",
        f"Medians of {trials} trials; J (rule) = max(64, 16 D, M), the floor that the default reaches only beyond "
        "2^26 entries of V; the coreset posterior is NUTS 2 x (500 + 1000) (the spike and slab: its Gibbs "
        "kernel) against benchmarks/models.py's full-data references; z2 = mean_d (mu_hat_d - mu_d)^2 / sd_d^2. ",
        with_commit)


def _certified_runs(stem: str, with_commit: bool, lead: list, extra: list, between: str, setup: str,
                    note: str = "") -> str:
    """Coreset runs certified against all rows, one per line: the `lead` columns, the compiled construction
    time, the `extra` columns ((header, row -> text) pairs), then points, the certificate and the largest z
    between the variants of a trial (`between` names them); under it `setup` (OMP's settings), the route, `note`
    and the provenance."""
    data = _load(stem)
    head = ([h for h, _ in lead] + ["construction (compiled)"] + [h for h, _ in extra]
            + ["points", "certificate KL (se)", "k-hat", "verdict", f"max abs z between {between}"])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in data["runs"]:
        z = f"{r['max_z_between']:.3f}" if "max_z_between" in r else ""
        cells = ([f(r) for _, f in lead] + [_seconds(r["build_s"])] + [f(r) for _, f in extra]
                 + [str(r["points"]), f"{_fmt(r['kl'], 3)} ({_fmt(r['kl_se'], 2)})", f"{r['khat']:.2f}", r["verdict"],
                    z])
        lines.append("| " + " | ".join(cells) + " |")
    s = data["settings"]
    lines += ["", f"N = {s['N']:,}{setup.format(**s)}, then NUTS 2 x (400 + 400) on the coreset and `cj.certify` "
              f"against all N rows; {note}z between {between}: the largest |difference| of the two coreset "
              "posteriors' means (same trial) in their pooled sd. " + provenance(data, stem, with_commit)]
    return "\n".join(lines)


def table_default_features_large(with_commit: bool) -> str:
    """The default rule's J against 500 at N = 10^6 (investigations/default_features.py --large)."""
    lead = [(k, lambda r, k=k: str(r[k])) for k in ("problem", "D", "J", "trial")]
    return _certified_runs("default_features_large", with_commit, lead, [], "J's", "; OMP at M = {M}",
                           "the real files are tiled to N rows; ")


def table_omp_budget(with_commit: bool) -> str:
    """OMP's step budget, M against the default 2 M, on the model suite (investigations/omp_budget.py)."""
    data = _load("omp_budget")
    s = data["settings"]
    return _markdown_with_note(
        "omp_budget",
        f"Medians of {s['trials']} trials (the worst trial's error ratio); both budgets on the same V; the "
        "certificate from NUTS 2 x (400 + 400) draws of each coreset against all rows. ", with_commit)


def table_omp_budget_large(with_commit: bool) -> str:
    """OMP's step budget at N = 5e5 with construction times (investigations/omp_budget.py --large)."""
    lead = [(k, lambda r, k=k: str(r[k])) for k in ("problem", "trial", "budget")]
    extra = [("steps", lambda r: str(r["steps"])), ("relative error", lambda r: _fmt(r["relative_error"], 3))]
    return _certified_runs("omp_budget_large", with_commit, lead, extra, "budgets",
                           ", D = 10 (vs_peers' NumPyro models); OMP at M = {M} with each budget")


def table_omp_low_rank(with_commit: bool) -> str:
    """OMP on low-rank factors of V at N = 5e5 (investigations/omp_low_rank.py)."""
    lead = [("problem", lambda r: r["problem"]), ("width", lambda r: f"{r['width']} of {r['J']}")]
    extra = [("discarded energy", lambda r: _fmt(r["relative_discarded"], 2)),
             ("target's discarded part", lambda r: _fmt(r["target_tail"], 2)),
             ("error on V", lambda r: _fmt(r["relative_error"], 4)),
             ("points shared with V's", lambda r: str(r["shared_points"]))]
    return _certified_runs("omp_low_rank", with_commit, lead, extra, "widths",
                           ", D = 10 (vs_peers' NumPyro models); OMP at M = {M} on V and on A = V B (B: V's top "
                           "right singular vectors), its time the solver's compiled call (median of {repeats})")


def table_cpu_emitters(with_commit: bool) -> str:
    """XLA:CPU's classic fusion emitters against its default, per program (investigations/cpu_emitters.py)."""
    data = _load("cpu_emitters")
    lines = ["| row | first call: XLA defaults | ours | all programs | compiled call: XLA defaults | ours | "
             "all programs |", "|---|---|---|---|---|---|---|"]
    for row, t in data["table"].items():
        lines.append(f"| `{row}` | {t['xla']['first_s']:.2f} s | {t['ours']['first_s']:.2f} s "
                     f"({t['ours_first_ratio']:.2f}x) | {t['all']['first_s']:.2f} s ({t['all_first_ratio']:.2f}x) | "
                     f"{t['xla']['second_s']:.3f} s | {t['ours']['second_s']:.3f} s ({t['ours_second_ratio']:.2f}x) | "
                     f"{t['all']['second_s']:.3f} s ({t['all_second_ratio']:.2f}x) |")
    lines += ["", f"Medians of {data['repeats']} fresh processes per row and arm, empty compilation caches, the arms "
              "alternating; ratios over XLA's defaults. Ours: the classic emitters for the projection, OMP, "
              "the fast-compiled small programs and a coreset's sampler where rows x D <= 2^15; all "
              "programs: `XLA_FLAGS=--xla_cpu_use_fusion_emitters=false`. " +
              provenance(data, "cpu_emitters", with_commit)]
    return "\n".join(lines)


def table_route_commits(with_commit: bool, stem: str = "route_commits_ahead") -> str:
    """vs_peers' cold fixed route at two commits side by side (investigations/route_commits.py)."""
    data = _load(stem)
    names = {"coreset_s": "`cj.coreset` (with `cj.from_numpyro`)", "sample_s": "`cj.sample`",
             "certify_s": "`cj.certify`", "total_s": "the route"}
    lines = ["| N | stage | before | after | paired change |", "|---|---|---|---|---|"]
    for n, row in data["table"].items():
        for stage, name in names.items():
            lines.append(f"| {_fmt(int(n))} | {name} | {row['base'][stage]:.2f} s | {row['head'][stage]:.2f} s | "
                         f"{row['paired_change_s'][stage]:+.2f} s |")
    same = all(row["same_coreset"] for row in data["table"].values())
    lines += ["", f"Medians of {data['repeats']} fresh processes per commit, empty compilation caches, the two "
              "commits alternating; the paired change is the median of after minus before, round by round. "
              + ("Both commits built the same coreset, point for point, at every size. " if same else
                 "The commits built different coresets. ") + provenance(data, stem, with_commit)]
    return "\n".join(lines)


TABLES: dict[str, Callable[[bool], str]] = {
    "cold_start": table_cold_start,
    "certify": table_certify,
    "models": table_models,
    "models_published": lambda with_commit: table_models(with_commit, "models_published"),
    "models_refine": lambda with_commit: table_models(with_commit, "models_refine"),
    "vs_peers": table_vs_peers,
    "vs_peers_gpu": lambda with_commit: table_vs_peers(with_commit, "vs_peers_gpu"),
    "vs_peers_h100": lambda with_commit: table_vs_peers(with_commit, "vs_peers_h100"),
    "vs_peers_1e6_repeats": lambda with_commit: table_vs_peers(with_commit, "vs_peers_1e6_repeats"),
    "vs_peers_auto_1e6": lambda with_commit: table_vs_peers(with_commit, "vs_peers_auto_1e6"),
    "vs_peers_5e6": lambda with_commit: table_vs_peers(with_commit, "vs_peers_5e6"),
    "vs_peers_side_by_side": lambda with_commit: table_vs_peers(with_commit, "vs_peers_side_by_side"),
    "vs_peers_break_even": lambda with_commit: table_vs_peers(with_commit, "vs_peers_break_even"),
    "vs_peers_auto_side_by_side": lambda with_commit: table_vs_peers(with_commit, "vs_peers_auto_side_by_side"),
    "vs_peers_auto_1e6_latest": lambda with_commit: table_vs_peers(with_commit, "vs_peers_auto_1e6_latest"),
    "vs_peers_screen": lambda with_commit: table_vs_peers(with_commit, "vs_peers_screen"),
    "vs_peers_candidates_1e6": lambda with_commit: table_vs_peers(with_commit, "vs_peers_candidates_1e6"),
    "vs_peers_poisson10": lambda with_commit: table_vs_peers(with_commit, "vs_peers_poisson10"),
    "vs_peers_poisson10_1e6": lambda with_commit: table_vs_peers(with_commit, "vs_peers_poisson10_1e6"),
    "vs_peers_poisson10_5e6": lambda with_commit: table_vs_peers(with_commit, "vs_peers_poisson10_5e6"),
    "vs_peers_d50": lambda with_commit: table_vs_peers(with_commit, "vs_peers_d50"),
    "vs_peers_d50_auto": lambda with_commit: table_vs_peers(with_commit, "vs_peers_d50_auto"),
    "candidate_rows": table_candidate_rows,
    "d50_features": table_d50_features,
    "device_gpu": table_device_pipeline,
    "coreset_mcmc_scale": table_coreset_mcmc_scale,
    "coreset_mcmc_scale_h100": lambda with_commit: table_coreset_mcmc_scale(with_commit, "coreset_mcmc_scale_h100"),
    "hot_dog_weights": table_hot_dog_weights,
    "auto_size": table_auto_size,
    "auto_size_recheck": table_auto_size_recheck,
    "sparse_vi_cost": table_sparse_vi_cost,
    "screen_check": table_screen_check,
    "greedy_path": table_greedy_path,
    "cpu_emitters": table_cpu_emitters,
    "vs_peers_emitters": lambda with_commit: table_vs_peers(with_commit, "vs_peers_emitters"),
    "vs_peers_final": lambda with_commit: table_vs_peers(with_commit, "vs_peers_final"),
    "vs_peers_passes": lambda with_commit: table_vs_peers(with_commit, "vs_peers_passes"),
    "vs_peers_passes2": lambda with_commit: table_vs_peers(with_commit, "vs_peers_passes2"),
    "route_commits_ahead": table_route_commits,
    "route_commits_session": lambda with_commit: table_route_commits(with_commit, "route_commits_session"),
    "vs_peers_ahead": lambda with_commit: table_vs_peers(with_commit, "vs_peers_ahead"),
    "vs_peers_final2": lambda with_commit: table_vs_peers(with_commit, "vs_peers_final2"),
    "route_commits_session2": lambda with_commit: table_route_commits(with_commit, "route_commits_session2"),
    "route_commits_session3": lambda with_commit: table_route_commits(with_commit, "route_commits_session3"),
    "route_commits_trial_init": lambda with_commit: table_route_commits(with_commit, "route_commits_trial_init"),
    "vs_peers_final3": lambda with_commit: table_vs_peers(with_commit, "vs_peers_final3"),
    "vs_peers_final4": lambda with_commit: table_vs_peers(with_commit, "vs_peers_final4"),
    "vs_peers_5e5_repeats": lambda with_commit: table_vs_peers(with_commit, "vs_peers_5e5_repeats"),
    "vs_peers_5e5_m50": lambda with_commit: table_vs_peers(with_commit, "vs_peers_5e5_m50"),
    "vs_peers_5e5_m80": lambda with_commit: table_vs_peers(with_commit, "vs_peers_5e5_m80"),
    "vs_peers_m80": lambda with_commit: table_vs_peers(with_commit, "vs_peers_m80"),
    "cold_path_quality": table_cold_path_quality,
    "certify_precision": table_certify_precision,
    "default_features": table_default_features,
    "default_features_large": table_default_features_large,
    "omp_budget": table_omp_budget,
    "omp_budget_large": table_omp_budget_large,
    "omp_low_rank": table_omp_low_rank,
    "float32_chains": table_float32_chains,
    "gpu_nuts": table_gpu_nuts,
    "gpu_loop": table_gpu_loop,
    "tf32_emulation": table_tf32_emulation,
    "gpu_nuts_precision": table_gpu_nuts_precision,
    "sample_placement": table_sample_placement,
    "vs_peers_h200_f32": lambda with_commit: table_vs_peers(with_commit, "vs_peers_h200_f32", H200_FLOAT32),
    "vs_peers_h200_host_chains": lambda with_commit: table_vs_peers(with_commit, "vs_peers_h200_host_chains",
                                                                    H200_FLOAT32),
    "vs_peers_h200_jax011_first": lambda with_commit: table_vs_peers(with_commit, "vs_peers_h200_jax011_first",
                                                                     H200_FLOAT32),
    "vs_peers_h200_jax011": lambda with_commit: table_vs_peers(with_commit, "vs_peers_h200_jax011", H200_FLOAT32),
    "vs_peers_h200_host_cpu": lambda with_commit: table_vs_peers(
        with_commit, "vs_peers_h200_host_cpu", "Our route alone, with `JAX_PLATFORMS=cpu`: the GPU unused. "),
    "coreset_mcmc_scale_h200": lambda with_commit: table_coreset_mcmc_scale(with_commit, "coreset_mcmc_scale_h200"),
}


# ---------------------------------------------------------------- regions


def files() -> list[str]:
    found = [os.path.join(ROOT, "README.md"), os.path.join(BENCHMARKS, "README.md")]
    found += sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [f for f in found if os.path.exists(f)]


def render(text: str, path: str) -> str:
    """`text` with every table region regenerated (README.md's without commit hashes)."""
    with_commit = os.path.abspath(path) != os.path.join(ROOT, "README.md")

    def one(m: re.Match) -> str:
        name = m.group("name")
        if name not in TABLES:
            raise SystemExit(f"{os.path.relpath(path, ROOT)}: unknown table {name!r}; tables: {', '.join(TABLES)}")
        return m.group(1) + TABLES[name](with_commit).rstrip("\n") + "\n" + m.group(4)

    return REGION.sub(one, text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="fail if a committed table differs from the JSON's")
    p.add_argument("--list", action="store_true", help="list the tables and where their regions are")
    args = p.parse_args(argv)
    stale, regions = [], {}
    for path in files():
        text = open(path, encoding="utf-8").read()
        for m in REGION.finditer(text):
            regions.setdefault(m.group("name"), []).append(os.path.relpath(path, ROOT))
        if args.list:
            continue
        new = render(text, path)
        if new != text:
            stale.append(os.path.relpath(path, ROOT))
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if args.list:
        for name, fn in TABLES.items():
            print(f"{name}: {fn.__doc__.splitlines()[0]} -> {', '.join(regions.get(name, ['(no region)']))}")
        return 0
    if args.check and stale:
        print("tables differ from benchmarks/results/*.json in: " + ", ".join(stale)
              + "\nrun: python docs/tables.py", file=sys.stderr)
        return 1
    if stale:
        print("rewrote tables in: " + ", ".join(stale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
