"""The main job's outputs: the table, results.json, the saved coresets and the figures."""

from __future__ import annotations

import json
import os

from .log import log as _log

__all__ = ["format_table", "write_outputs"]

def write_outputs(out, report, model, data, dataset, coresets, approx, config) -> dict:
    import numpy as np

    from ..interop.io import atomic_write, save

    os.makedirs(os.path.join(out, "coresets"), exist_ok=True)
    files = {"coresets": []}
    for (method, m), cs in coresets.items():
        path = os.path.join(out, "coresets", f"{method}_M{m}.npz")
        save(cs, path, data=data, config_method=method, norm=config["norm"],
             num_features=config["num_features"], seed=config["seed"])
        files["coresets"].append(path)
    try:
        files["plots"] = _plots(out, report, model, data, dataset, coresets, approx, config)
    except ImportError as err:
        _log(f"note: no plots ({err})")
        files["plots"] = []
    sampling = report.get("sampling")
    json_report = dict(report, files=files)
    if sampling is not None:
        json_report["sampling"] = {k: v for k, v in sampling.items() if k != "draws"}
    path = os.path.join(out, "results.json")
    text = json.dumps(json_report, indent=1, default=lambda o: np.asarray(o).tolist())
    atomic_write(path, lambda f: f.write(text.encode()))
    files["results"] = path
    return files


def _plots(out, report, model, data, dataset, coresets, approx, config) -> list:
    import jax
    import numpy as np

    from .. import plots
    from ..core import take_data
    from ..weighting.pihat import laplace

    written = []
    X, y = (np.asarray(a) for a in dataset.train)
    # "auto" sizes sort last: the certified choice is the one to show when there is one.
    order = sorted(config["sizes"], key=lambda m: (m == "auto", 0 if m == "auto" else m))
    main, largest = config["methods"][0], order[-1]
    middle = order[len(order) // 2]
    cs = coresets[(main, middle)]
    path = os.path.join(out, "coreset_points.png")
    labels = y if config["model"] == "logistic_regression" else None
    plots.coreset_points(X, cs.indices, cs.weights, labels,
                         title=f"{main} coreset, M = {middle} ({cs.num_points} points)", path=path)
    written.append(path)
    path = os.path.join(out, "errors.png")
    plots.errors(report["results"], path=path,
                 title=f"{config['model']}, N = {report['n']}, {config['norm']} features, J = "
                       f"{config['num_features']}")
    written.append(path)
    names = [f"θ{i}" for i in range(report["dim"])]
    sampling = report.get("sampling")
    path = os.path.join(out, "marginals.png")
    if sampling is not None:
        full = sampling["draws"]["full"]
        others = {k: v for k, v in sampling["draws"].items() if k != "full" and k.endswith(f"M={largest}")}
        plots.marginals(full, others, names=names, path=path,
                        title=f"posterior marginals ({config['sample']['method']}): full data against "
                              f"coresets of size M = {largest}")
    else:
        # Without --sample: Laplace approximations of each posterior, drawn from (cheap, labelled as such).
        key = jax.random.key(1)
        full = np.asarray(approx.sample(key, 4000))
        others = {}
        for method in config["methods"]:
            cs = coresets[(method, largest)]
            fit = laplace(model, take_data(data, cs.indices), init=approx.mean, weights=cs.weights)
            others[f"{method}, M={largest}"] = np.asarray(fit.sample(key, 4000))
        plots.marginals(full, others, names=names, path=path,
                        title=f"Laplace approximations of the posteriors: full data against coresets of "
                              f"size M = {largest} (run with --sample for MCMC)")
    written.append(path)
    import matplotlib.pyplot as plt
    plt.close("all")
    return written


ERROR_NOTE = ("error = ||sum_n v_n - V^T w|| / ||sum_n v_n||, the relative error of the coreset's weighted "
              "sum of projected log-likelihoods (HC Eq. 3.2): 0 is exact, 1 is no better than the empty "
              "coreset.\n  With fisher/centered features the per-datum vectors nearly cancel near the mode, "
              "so sum v is short and errors above 1 are normal for small M; compare methods at equal M.")

CERTIFY_NOTE = ("khat, KL est. = cj.certify from one {method} chain of {num_samples} draws on each coreset and one "
                "pass over the data: PSIS k-hat and the "
                "estimate of KL(coreset posterior || full posterior) in nats, no full-data MCMC needed; ! marks the verdict "
                "unreliable (k-hat >= 0.7 with importance ratios spread over more than a factor of 2) or poor "
                "(KL >= 0.5).")


def format_table(report: dict) -> str:
    sampled = any("w1_over_floor" in r for r in report["results"])
    certified = any("khat" in r for r in report["results"])
    tested = any("test_log_likelihood" in r for r in report["results"])
    head = (f"{'method':<14}{'M':>7}{'points':>8}{'time (s)':>11}{'1st call (s)':>14}{'error':>10}"
            + (f"{'khat':>7}{'KL est.':>10}" if certified else "") + (f"{'W1/floor':>10}" if sampled else "")
            + (f"{'test LL':>10}" if tested else ""))
    lines = [head]
    for r in report["results"]:
        median = "-" if r.get("time_is_first_call") else f"{r['time_s']:.4f}"
        size = f"a:{r['chosen_size']}" if r["size"] == "auto" else r["size"]  # a: chosen by the certificate
        line = (f"{r['method']:<14}{size:>7}{r['num_points']:>8}{median:>11}"
                f"{r['first_call_s']:>14.3f}{r['relative_error']:>10.3g}")
        if certified:
            line += f"{r.get('khat', float('nan')):>7.2f}{r.get('kl_estimate', float('nan')):>10.3g}"
            line += "!" if r.get("verdict") in ("unreliable", "poor") else " "
        if sampled:
            line += f"{r.get('w1_over_floor', float('nan')):>10.2f}"
        if tested:
            line += f"{r.get('test_log_likelihood', float('nan')):>10.4g}"
        lines.append(line)
    s = report["stages"]
    held_out = f", {report['n_test']} held-out rows" if report.get("n_test") else ""
    lines.append(f"N = {report['n']}{held_out}, D = {report['dim']}; Laplace {s['laplace_s']:.2f} s; projection "
                 f"{s['projection_s']:.2f} s")
    lines.append("time = median of repeated calls after compilation; 1st call = the first call, compilation "
                 "included (on a busy machine it can come out below the median)")
    lines.append(ERROR_NOTE)
    for r in report["results"]:
        if r["size"] == "auto":
            tried = ", ".join(f"{p['size']} (KL {p['kl']:.3g} ± {p['kl_se']:.2g}, {p['verdict']}"
                              f"{', screened' if p.get('screened') else ''})" for p in r["path"])
            what = ("smallest certified size for" if any(p["passed"] for p in r["path"]) else
                    "best size (lowest KL estimate), as none up to the limit reached")
            lines.append(f"a:{r['chosen_size']} = {r['method']}'s {what} KL <= {r['tol']} nats "
                         f"(cj.coreset(tol=...)); sizes tried: {tried}"
                         + ("; screened: judged from a subsample of the rows, the size chosen always by every row"
                            if any(p.get("screened") for p in r["path"]) else ""))
    if certified:
        lines.append(CERTIFY_NOTE.format(**report["config"]["sample"]))
    if sampled:
        floor = report["sampling"]["noise_floor_w1"]
        lines.append(f"W1/floor = W1(coreset posterior, full posterior) / W1 between two full-data chains "
                     f"(= {floor:.3g}), {report['sampling']['settings']['method']} with "
                     f"{report['sampling']['settings']['num_samples']} draws each: about 1 is as good as the "
                     f"full data at this many draws.")
    if tested:
        full = (report.get("sampling") or {}).get("full_test_log_likelihood")
        lines.append("test LL = mean over the held-out rows of log (1/S) sum_s p(row | theta_s), theta_s the draws of "
                     "the coreset's chain (cj.metrics.test_log_likelihood): higher is better"
                     + (f"; the full data's chains give {full:.4g}" if full is not None else "") + ".")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------
# bench and info.
