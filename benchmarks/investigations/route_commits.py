"""vs_peers' cold fixed route at two commits of this repository, side by side.

The route is `ours_fixed` of benchmarks/vs_peers.py: `cj.from_numpyro` of its logistic model (D = 10), then
`cj.coreset(..., size=10 D, method="omp")`, `cj.sample` (NUTS, 2 chains x (400 + 400)) and `cj.certify`. Each
run is a fresh Python process with empty compilation caches, importing the package from a git worktree of the
commit it measures (the benchmark code and data come from this checkout, so both commits run the same
problem). The two commits alternate, their order reversed every other round, so a change of load on the shared
machine hits both alike; the table gives medians per stage and the median of the paired differences (head
minus base, round by round). The coreset, its certificate's KL and its number of points are recorded too:
a change of speed that changes them is a change of method, and the table says so.

    python benchmarks/investigations/route_commits.py --base REV [--head REV] --sizes 500000 1000000 --repeats 5
    python benchmarks/investigations/route_commits.py --quick      # CI smoke run: N = 2000, HEAD against itself
Writes results/route_commits.json (route_commits_quick.json with --quick); --tag NAME appends _NAME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]
import common  # noqa: E402

STAGES = ("coreset_s", "sample_s", "certify_s", "total_s")

CHILD = r"""
import json, os, sys, tempfile, time, warnings
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()
os.environ["JAX_COMPILATION_CACHE_DIR"] = os.environ["XDG_CACHE_HOME"]
os.environ["CORESETS_JAX_NO_CACHE"] = "1"
os.environ["CORESETS_JAX_PROGRESS"] = "0"
warnings.simplefilter("ignore")
import numpy as np
import jax
import coresets_jax as cj
import vs_peers
n, warmup, draws = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
scope = {}
exec(vs_peers.MODEL_CODE, scope)
X, y, _ = vs_peers.make_data("logistic", 10, n)
X, y = jax.device_put(X), jax.device_put(y)
key = jax.random.key(0)
t0 = time.perf_counter()
model, data = cj.from_numpyro(scope["logistic"], X, y)
cs = cj.coreset(model, data, size=10 * 10, method="omp", key=key)
jax.block_until_ready(cs.weights)
t1 = time.perf_counter()
post = cj.sample(model, data, key, weights=cs, num_samples=draws, num_warmup=warmup, num_chains=2, warn=False)
jax.block_until_ready(post.samples)
t2 = time.perf_counter()
cert = cj.certify(model, data, cs, post.samples)
t3 = time.perf_counter()
w = np.asarray(cs.weights)
print("JSON" + json.dumps({"coreset_s": t1 - t0, "sample_s": t2 - t1, "certify_s": t3 - t2, "total_s": t3 - t0,
                           "kl": float(cert.kl), "verdict": cert.verdict, "points": int(np.sum(w > 0)),
                           "weights_sum": float(np.sum(w, dtype=np.float64)),
                           "indices": [int(i) for i in np.asarray(cs.indices)[w > 0]],
                           "package": os.path.dirname(cj.__file__)}))
"""


def _worktree(rev: str, folder: str) -> str:
    """A detached git worktree of `rev` in `folder`; returns its full commit id."""
    full = subprocess.run(["git", "rev-parse", "--verify", rev + "^{commit}"], cwd=ROOT, check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    subprocess.run(["git", "worktree", "add", "--detach", "--force", folder, full], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return full


def _run(tree: str, n: int, warmup: int, draws: int) -> dict:
    """One route in a fresh process importing `coresets_jax` from `tree` (PYTHONPATH before the installed one)."""
    env = dict(os.environ, CORESETS_JAX_PROGRESS="0", PYTHONPATH=os.pathsep.join([tree, HERE]))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(n), str(warmup), str(draws)], stdout=subprocess.PIPE,
                          text=True, env=env, cwd=HERE)
    if proc.returncode != 0:
        raise RuntimeError(f"the route failed with exit status {proc.returncode} (its stderr is above)")
    result = json.loads([line for line in proc.stdout.splitlines() if line.startswith("JSON")][-1][4:])
    if os.path.realpath(result["package"]) != os.path.realpath(os.path.join(tree, "coresets_jax")):
        raise RuntimeError(f"the child imported {result['package']}, not the worktree {tree}")
    return result


def main(argv=None, *, quick=None, out_dir=None) -> dict:
    def extra(p):
        p.add_argument("--base", default="HEAD~1", help="the commit to compare against (default HEAD~1)")
        p.add_argument("--head", default=None, help="the commit measured (default: this checkout's files)")
        p.add_argument("--sizes", type=int, nargs="+", default=[500_000, 1_000_000])
        p.add_argument("--repeats", type=int, default=5)
        p.add_argument("--tag", default="")

    args = common.resolve(argv, quick, out_dir, __doc__, extra)
    sizes = [2000] if args.quick else args.sizes
    repeats = 1 if args.quick else args.repeats
    warmup, draws = (100, 100) if args.quick else (400, 400)
    base_rev = "HEAD" if args.quick else args.base
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"base": os.path.join(tmp, "base")}
        commits = {"base": _worktree(base_rev, trees["base"])}
        if args.head is None:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, stdout=subprocess.PIPE,
                                  text=True).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, check=True,
                                   stdout=subprocess.PIPE, text=True).stdout.strip()
            trees["head"], commits["head"] = ROOT, head + (" with uncommitted changes" if dirty else "")
        else:
            trees["head"] = os.path.join(tmp, "head")
            commits["head"] = _worktree(args.head, trees["head"])
        try:
            runs = {n: {"base": [], "head": []} for n in sizes}
            for rep in range(repeats):
                for n in sizes:
                    for v in (("base", "head") if rep % 2 == 0 else ("head", "base")):
                        r = _run(trees[v], n, warmup, draws)
                        runs[n][v].append(r)
                        print(f"N={n:<8} {v:<5} coreset {r['coreset_s']:5.2f}  sample {r['sample_s']:5.2f}  certify "
                              f"{r['certify_s']:5.2f}  total {r['total_s']:5.2f} s  KL {r['kl']:.3g}  points "
                              f"{r['points']}", flush=True)
        finally:
            for v, tree in trees.items():
                if tree != ROOT:
                    subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    table = {}
    for n in sizes:
        base, head = runs[n]["base"], runs[n]["head"]
        row = {v: {s: float(np.median([r[s] for r in runs[n][v]])) for s in STAGES} for v in ("base", "head")}
        row["paired_change_s"] = {s: float(np.median([h[s] - b[s] for b, h in zip(base, head)])) for s in STAGES}
        row["same_coreset"] = all(r["indices"] == base[0]["indices"] and r["weights_sum"] == base[0]["weights_sum"]
                                  for r in base + head)
        row["kl"] = {v: runs[n][v][0]["kl"] for v in ("base", "head")}
        row["points"] = {v: runs[n][v][0]["points"] for v in ("base", "head")}
        table[str(n)] = row
        print(f"N={n}: total {row['base']['total_s']:.2f} -> {row['head']['total_s']:.2f} s (paired median change "
              f"{row['paired_change_s']['total_s']:+.2f} s), same coreset: {row['same_coreset']}", flush=True)
    result = {"environment": common.environment(), "commits": commits, "repeats": repeats, "sizes": sizes,
              "warmup": warmup, "draws": draws, "table": table,
              "runs": {str(n): {v: [{k: x for k, x in r.items() if k not in ("indices", "package")} for r in rs]
                                for v, rs in cell.items()} for n, cell in runs.items()},
              "what": "vs_peers' ours_fixed route (logistic D = 10, OMP M = 100, NUTS 2 chains, cj.certify), cold "
                      "in fresh processes, two commits alternating; medians and median paired changes"}
    stem = "route_commits" + (f"_{args.tag}" if args.tag else "")
    common.write_json(result, args.out, common.stem(stem, args.quick))
    return result


if __name__ == "__main__":
    main()
