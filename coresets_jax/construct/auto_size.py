"""`cj.coreset(model, data, key=key, tol=...)`: the smallest coreset whose certificate says its KL is at most
`tol` nats (ours).

The certificate (`cj.certify`) estimates KL(pi_w || pi) from draws of the coreset posterior with one pass
over the data. The search asks it at a sequence of sizes, reusing what does not depend on the size:

1. pi_hat and the projection V are computed once (HC Algorithm 3's first two steps). With OMP, one run at
   SHARED x M_0 gives the coresets of every size the search can try up to there (the greedy path,
   `solvers.omp`'s `path_sizes`), so they cost one compilation and one run, not one each.
2. Sizes grow geometrically, M = M_0, 2 M_0, 4 M_0, ..., up to the limit (`size`, or `default_limit`), with
   M_0 the power of two at or above max(16, D + 1) (a coreset needs about D + 1 points to pin the mean and
   scale of a D-dimensional posterior). At each size the vector method (default OMP, the best Hilbert method
   on every suite problem in benchmarks/models.py) builds a coreset on V, NUTS draws its posterior (2 chains,
   started from the previous size's last draws when its certificate trusted them, verdict "good" or
   "usable", else from the coreset's own Laplace fit), and `cj.certify` scores it.
3. A size passes when its certificate is trustworthy (verdict "good" or "usable") and its KL estimate plus
   two standard errors is at most `tol`: k-hat alone is not the test (on a near-exact coreset the importance
   weights are nearly equal and k-hat is noise).
4. Between the last failing and the first passing size, one more size at their geometric mean is tried
   (so the answer is within a factor sqrt(2) of the smallest passing size on a grid twice as fine).
5. If no size up to the limit passes, the coreset with the lowest KL estimate is returned with a warning
   that gives the KL reached; its certificate's verdict is then at best "usable", never "good". Of the sizes
   whose estimate is within two standard errors of the lowest, the one with the fewest points (then the
   smallest) is returned: a larger size of the same coreset, or one no better beyond the noise, buys nothing
   (Bradley-Terry's sizes 512 and 1024 both built 500 points, KL 1.626 and 1.622 +- 0.03). Sizes certified
   "unreliable" are left out of that choice unless every size is.
6. If two failing sizes in a row build coresets of the same number of points, fewer than the smaller size,
   the method has stopped adding points (OMP fits the J projected features exactly with at most J points),
   and every larger size would build the same coreset: the search stops there, and `cj.coreset` switches
   strategy (its `switch`): a projection with more features, then weights trained against the full data.

7. Screening (ours; `certification.screen`). A certificate's pass over all N rows costs N x S log-likelihood
   evaluations at every size tried (1.4 s per size at N = 10^6, S = 1000, D = 10 on 2 CPU cores). Where the data
   are in memory on one device and N >= 2^17, each size is first judged from a subsample of 16,384 rows with a
   second-order Taylor control variate (the difference estimator of HMCECS), whose error is measured from the
   spread of four groups of the subsample. Its certificate decides the size when NOISE_BOUND (4) times that error
   moves the KL estimate by at most max(its standard error, SCREEN_SLACK x tol) (`passes.kl_shift_bound`), or when
   the size fails by more than that shift; otherwise the size gets `cj.certify`'s certificate. The size returned
   always gets `cj.certify`'s (at such N itself often a screen, but one audited against the full pass at 40 draws:
   `certification.screen.audited_screen`); if that reverses a screened pass, the search runs again on `cj.certify`
   alone (the coresets and draws are kept). The path's entries say which were screened (`screened`, and
   `screened_kl` where the certificate replaced a screen).

8. Predicted sizes (ours; the second-order features of `features.taylor`, which `cj.coreset` uses at D >= 30).
   There the solver's residual predicts each coreset's KL (`features.taylor`, Eq. (*)), so one OMP run at the
   limit builds a grid of sizes (`predicted_grid`, four per doubling) and their predicted KLs, and the search
   certifies the smallest size predicted at PREDICTED_START x tol; if it fails (a posterior far enough from
   Gaussian that the second order misses), the smallest predicted at each of PREDICTED_ASCENT x tol, then the
   limit. A size costs one draw and one certificate, not one per doubling. The run stops once its prediction
   is below PREDICTED_STOP x tol (the steps beyond cost most, each on a larger support); only a failure
   reruns it further, to the ascent's sizes.

Every size is checked to fit in memory before it is built (`memory.check_fits`); sizes that cannot fit cap
the search. The result carries its certificate (`cs.certificate`) and the path (`cs.info["path"]`: per size
tried, the size, points, KL estimate and its standard error, k-hat, verdict and seconds).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Coreset, Model
from ..registry import Construction
from ..core import caller

__all__ = ["DEFAULT_LIMIT", "FIRST_SIZE", "auto_coreset", "decisive", "default_limit", "first_size", "passes",
           "planned_sizes", "predicted_grid"]

FIRST_SIZE = 16          # the smallest size tried (raised to D + 1)
DEFAULT_LIMIT = 4096     # the default largest size (benchmarks/auto_size.py)
Z = 2.0                  # standard errors added to the KL estimate before comparing with tol
SAMPLING = dict(method="nuts", num_samples=500, num_warmup=500, num_chains=2)
SHARED = 4               # sizes up to SHARED x M_0 draw and certify on one shared capacity
NOISE_BOUND = 4.0        # a screened r's error bound, in sds of its estimated error (as the float32 audit)
SCREEN_SLACK = 0.1       # a screen decides where its error moves the KL by at most this x tol (or its se)
PREDICTED_START = 0.8    # second-order features: first certify the smallest size predicted at this x tol
PREDICTED_ASCENT = (1 / 4,)  # ... then, where it fails, those predicted at these x tol
PREDICTED_STOP = 0.5     # the run that predicts stops below this x tol (a failure reruns it below the ascent)
GRID_RATIO = 2 ** 0.25   # the predicted sizes' grid: four per doubling


def first_size(dim: int, limit: int) -> int:
    """M_0: the power of two at or above max(FIRST_SIZE, D + 1), at most the limit."""
    return min(limit, 1 << int(math.ceil(math.log2(max(FIRST_SIZE, dim + 1)))))


def default_limit(n: int) -> int:
    """The largest size searched when `size` is not given: min(N, DEFAULT_LIMIT)."""
    return min(n, DEFAULT_LIMIT)


def passes(cert, tol: float) -> bool:
    """The certificate is trustworthy and its KL estimate, plus Z standard errors, is at most tol."""
    return cert.verdict in ("good", "usable") and float(cert.kl) + Z * float(cert.kl_se) <= tol


def _shared_capacity(capacity: int, first: int) -> int:
    """The slots a size's draws and certificate use: the power of two at or above max(capacity, SHARED x
    first), so that the sizes up to SHARED x M_0 (the usual path, e.g. 16, 32, 64, 45) share one compiled
    sampler and one compiled certificate; larger sizes get their own power of two."""
    return 1 << int(math.ceil(math.log2(max(capacity, SHARED * first))))


def padded(cs: Coreset, capacity: int) -> Coreset:
    """`cs` with its slots extended to `capacity` by padding (row 0, weight 0)."""
    extra = capacity - cs.capacity
    if extra <= 0:
        return cs
    indices = jnp.concatenate([jnp.asarray(cs.indices), jnp.zeros(extra, jnp.asarray(cs.indices).dtype)])
    weights = jnp.concatenate([jnp.asarray(cs.weights), jnp.zeros(extra, jnp.asarray(cs.weights).dtype)])
    return Coreset(indices, weights, cs.info, cs.method, cs.settings, cs.certificate)


def predicted_grid(first: int, limit: int) -> tuple:
    """Sizes from `first` to `limit` (included), GRID_RATIO apart, rounded: those the predicted search chooses
    among (one run builds them all)."""
    sizes, m = [], float(first)
    while m < limit:
        sizes.append(int(round(m)))
        m *= GRID_RATIO
    return tuple(sorted(set(sizes) | {limit}))


def _sizes_between(lo: int, hi: int) -> Optional[int]:
    """The geometric mean of lo and hi, rounded, if strictly between them."""
    mid = int(round(math.sqrt(lo * hi)))
    return mid if lo < mid < hi else None


def planned_sizes(first: int, limit: int) -> tuple:
    """(capacity, sizes): the sizes the search can try up to min(limit, SHARED x first), below that capacity:
    the doublings from `first` and the geometric means between consecutive ones (e.g. 16 -> (64, (16, 23,
    32, 45)))."""
    capacity = min(limit, SHARED * first)
    doublings, m = [], first
    while m < capacity:
        doublings.append(m)
        m *= 2
    doublings.append(capacity)
    mids = [_sizes_between(a, b) for a, b in zip(doublings, doublings[1:])]
    return capacity, tuple(sorted({m for m in doublings + mids if m is not None and m < capacity}))


def _best_unreached(tried: dict) -> int:
    """The size returned when none passed (module docstring, 5): of the sizes whose KL estimate is within Z
    standard errors (of the difference) of the lowest, the one with the fewest points, then the smallest.
    Sizes certified `unreliable` (an estimate not to be trusted, often too low) count only when all are."""
    certs = {s: cs.certificate for s, cs in tried.items()}
    certs = {s: c for s, c in certs.items() if c.verdict != "unreliable"} or certs
    lowest = min(certs, key=lambda s: certs[s].kl)
    close = [s for s, c in certs.items()
             if c.kl - Z * math.hypot(c.kl_se, certs[lowest].kl_se) <= certs[lowest].kl]
    return min(close, key=lambda s: (tried[s].num_points, s))


def auto_coreset(model: Model, data: Any, n: int, tol: float, limit: int, construction: Construction,
                 key: jax.Array, build_at, sample_kwargs: Optional[dict] = None, draw=None, judge=None,
                 dim: Optional[int] = None, build_path=None, screen=None, predicted=None, switch=None) -> Coreset:
    """The search (module docstring). `build_at(size) -> Coreset` builds the method's coreset at a size on the
    shared projection (it checks the memory); `key` drives the draws. `draw(cs, key, init) -> Posterior` and
    `judge(cs, draws) -> Certificate` default to NUTS on `data` (`SAMPLING`) and `cj.certify` against `data`
    (a stream passes its own: draws from the selected rows, certificates over the chunks).

    `build_path(capacity, sizes) -> {size: Coreset}` (optional; OMP's greedy path): one run at `capacity` that
    also gives the coresets of the smaller `sizes` (`planned_sizes`); used for the sizes up to that capacity,
    which then cost one compilation and one run instead of one each.

    `screen(cs, draws, seed) -> (Certificate, noise) or None` (optional; `certification.screen`): a cheaper
    certificate from a subsample, used for a size's decision where its measured error cannot change it
    (`decisive`; module docstring, 7). The size returned is always certified by `judge`; if that reverses
    the screen's pass, the search runs again on `judge` alone (the draws are kept).

    `predicted(first, deeper) -> (coresets, kl)` (optional; second-order features, module docstring, 8): one
    run that builds the coresets of a grid of sizes from `first` up to the limit, and the KL each is predicted
    to have, down to PREDICTED_STOP x tol (`deeper`: to the smallest of PREDICTED_ASCENT x tol); the search then
    certifies the sizes the prediction points to (`search_predicted`) instead of doubling.

    `switch(best, saturated) -> (Coreset, entries) or None` (optional): where no size passes, another strategy
    from the best coreset (more features, or weights trained against the full data: `cj.coreset` chooses); its
    coreset, certified, is returned where it passes tol or has the lower KL estimate, and `entries` join the
    path. The warning that no size reached tol is given only when the switch did not reach it either."""
    from ..certification import certify
    from ..inference import sample

    sampling = dict(SAMPLING, **(sample_kwargs or {}))
    if draw is None:
        def draw(cs, k, init):
            return sample(model, data, k, weights=cs, init=init, warn=False, **sampling)
    if judge is None:
        def judge(cs, draws):
            return certify(model, data, cs, draws)
    path, tried, from_path, drawn, exact = [], {}, {}, {}, {}
    init = None
    screening = screen is not None

    def build(size: int) -> Coreset:
        if size in from_path:
            return from_path[size]
        if build_path is not None:
            capacity, sizes = planned_sizes(first, limit)
            if size == capacity or size in sizes:
                if not from_path:
                    from_path.update(build_path(capacity, sizes))
                return from_path[size]
        return build_at(size)

    def certified(size: int, shared: Coreset, post, use_screen: bool):
        """The size's certificate: the screen's where it is decisive, else (and cached) `judge`'s."""
        if size in exact:
            return exact[size]
        if use_screen:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = screen(shared, post.samples, size)
            if got is not None and decisive(got[0], got[1], tol):
                return got[0]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the certificate judges the draws; the path reports them
            exact[size] = judge(shared, post.samples)
        return exact[size]

    def attempt(size: int):
        nonlocal init
        t0 = time.perf_counter()
        if size in drawn:  # a second search (a screen reversed): the same coreset and draws
            cs, shared, post = drawn[size]
        else:
            cs = build(size)
            k = jax.random.fold_in(key, size)
            # Draws and certificate on slots padded to a shared capacity: one compiled sampler and certificate
            # for the first sizes, not one per size (padding has weight 0 and adds exactly 0 to the density).
            shared = padded(cs, min(max(n, cs.capacity), _shared_capacity(cs.capacity, first)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                post = draw(shared, k, init)
            drawn[size] = (cs, shared, post)
        cert = certified(size, shared, post, screening)
        # The next size's chains start at these draws only when this certificate trusts them: an unreliable
        # or poor coreset posterior can put its mass where the full one has none (a Student-t regression's
        # 16-point coreset had a spike at scale 3e-5), and chains started there stay in the next size's copy
        # of that spike instead of its main mode. Otherwise they start from the coreset's own Laplace fit.
        init = np.asarray(post.samples)[:, -1, :] if cert.verdict in ("good", "usable") else None
        path.append(_entry(size, cs, cert, tol, time.perf_counter() - t0))
        if size in kl_of:
            path[-1]["predicted_kl"] = float(kl_of[size])
        tried[size] = (cs.with_certificate(cert), post)
        return path[-1]["passed"]

    def search():
        """(hi, lo, saturated): the smallest passing size found (or None), the largest failing one below
        it, and (lo, size, points) where the coreset stopped growing."""
        size, lo, before = first, None, None
        while True:
            if attempt(size):
                break
            if before is not None and _stopped_growing(before, path[-1]):
                return None, lo, (lo, size, path[-1]["points"])  # every larger size builds this same coreset
            lo, before = size, path[-1]
            if size >= limit:
                return None, lo, None
            size = min(limit, 2 * size)
        hi = size
        if lo is not None:
            mid = _sizes_between(lo, hi)
            if mid is not None and attempt(mid):
                hi = mid
        return hi, lo, None

    def confirm(size: int) -> bool:
        """Certify `size` with `judge` if its certificate was screened; True where the decision stands."""
        cs, shared, post = drawn[size]
        if size in exact:
            return True
        t0 = time.perf_counter()
        screened = tried[size][0].certificate
        cert = certified(size, shared, post, False)
        tried[size] = (cs.with_certificate(cert), post)
        entry = next(e for e in reversed(path) if e["size"] == size)
        entry.update(_entry(size, cs, cert, tol, entry["seconds"] + time.perf_counter() - t0),
                     screened_kl=float(screened.kl))
        return entry["passed"] == passes(screened, tol)

    def search_predicted():
        """(hi, lo, saturated) as `search` gives them, over the grid the prediction covers: the smallest size
        predicted at PREDICTED_START x tol; where it fails, the smallest predicted at each of PREDICTED_ASCENT
        x tol in turn, then the largest size. The prediction is within about 5% of the certificate's KL on
        logistic regression at D = 50 and 100, so the first size usually passes: one draw, one certificate."""
        sizes = sorted(kl_of)

        def smallest(bound: float) -> Optional[int]:
            return next((m for m in sizes if kl_of[m] <= bound), None)

        size = smallest(PREDICTED_START * tol) or sizes[-1]
        if attempt(size):
            return size, None, None
        lo = size
        built, deeper = predicted(first, True)  # the run again, further down: the sizes of the ascent
        from_path.update({m: cs for m, cs in built.items() if m not in drawn})
        kl_of.update({m: kl for m, kl in deeper.items() if m not in drawn})
        sizes = sorted(kl_of)
        for fraction in PREDICTED_ASCENT + (0.0,):  # 0: the largest size, whatever its prediction
            nxt = smallest(fraction * tol) if fraction > 0 else sizes[-1]
            if nxt is None or nxt <= lo:
                continue
            if attempt(nxt):
                return nxt, lo, None
            lo = nxt
        return None, lo, None

    d = _dim(model, data) if dim is None else dim
    first = first_size(d, limit)
    kl_of = {}
    if predicted is not None:
        built, kl_of = predicted(first, False)
        from_path.update(built)
        search = search_predicted
    hi, lo, saturated = search()
    if screening and hi is not None and not confirm(hi):
        screening = False  # the screen passed a size the certificate fails: search again on certificates
        hi, lo, saturated = search()
    best_size = hi
    if hi is None:
        best_size = _best_unreached({s: tried[s][0] for s in tried})
        # a screened failure is decisive (its KL less its error bound exceeds tol), but the one returned is
        # certified by `judge` all the same, and returned as passing if that certificate says so
        if screening and not confirm(best_size) and passes(tried[best_size][0].certificate, tol):
            hi = best_size
    best = tried[best_size][0]
    samples = tried[best_size][1].samples
    if hi is None and switch is not None:
        switched = switch(best, None if saturated is None else saturated[2])
        if switched is not None:
            other, entries = switched
            path.extend(entries)
            if passes(other.certificate, tol) or (other.certificate.verdict != "unreliable"
                                                  and other.certificate.kl < best.certificate.kl):
                best, hi = other, (other.capacity if passes(other.certificate, tol) else None)
                best_size = other.capacity
                samples = other.info.get("samples", samples)
    if hi is None:
        cert = best.certificate
        reached = f"{cert.kl:.3g} ± {cert.kl_se:.2g}"
        if saturated is None:
            tried_too = sorted({e["strategy"] for e in path if "strategy" in e})
            also = f" ({' and '.join(tried_too)} did not reach it either)" if tried_too else ""
            warnings.warn(f"coreset: no size up to {limit} reached KL <= {tol} nats{also} (the best, size "
                          f"{best_size} with {best.num_points} points, reached an estimated KL of {reached}, verdict "
                          f"{cert.verdict!r}); it is returned; raise size= (the limit), or use a larger tol",
                          RuntimeWarning, stacklevel=caller.stacklevel())
        else:
            a, b, points = saturated
            tried_too = sorted({e["strategy"] for e in path if "strategy" in e})
            also = f"; then {' and '.join(tried_too)} did not reach it either" if tried_too else ""
            warnings.warn(f"coreset: the coreset stopped growing at {points} points (sizes {a} and {b} built the "
                          f"same number: the method fit its projected features exactly), and none reached KL <= "
                          f"{tol} nats{also} (the best reached an estimated KL of {reached}, verdict "
                          f"{cert.verdict!r}); it is returned. Use a larger tol, or full-data MCMC",
                          RuntimeWarning, stacklevel=caller.stacklevel())
        if cert.verdict == "good":
            cert = dataclasses.replace(cert, verdict="usable", reason=(
                f"its KL estimate {cert.kl:.3g} + {Z:g} standard errors is above tol = {tol}, so it is not "
                f"good for this tolerance (else: {cert.reason})"))
            best = best.with_certificate(cert)
    info = dict(best.info, path=path, tol=tol, limit=limit, samples=samples,
                saturated_at=None if saturated is None else saturated[2])
    return Coreset(best.indices, best.weights, info, best.method, dict(best.settings, tol=tol, limit=limit,
                                                                        size="auto"), best.certificate)


def _entry(size: int, cs: Coreset, cert, tol: float, seconds: float) -> dict:
    """The path's record of one size."""
    return {"size": size, "points": int(cs.num_points), "kl": float(cert.kl), "kl_se": float(cert.kl_se),
            "khat": float(cert.khat), "verdict": cert.verdict, "passed": passes(cert, tol),
            "screened": getattr(cert, "precision", None) == "screened", "seconds": seconds}


def decisive(cert, noise: float, tol: float) -> bool:
    """A screened certificate decides a size (module docstring, 7) when its error bound, NOISE_BOUND x the
    error's sd, shifts its KL (`certification.screen.kl_shift`) by at most max(its standard error,
    SCREEN_SLACK x tol), or when it fails by more than that shift (KL - shift > tol)."""
    from ..certification.screen import kl_shift

    shift, _ = kl_shift(np.asarray(cert.log_ratio), NOISE_BOUND * noise)
    if shift <= max(float(cert.kl_se), SCREEN_SLACK * tol):
        return True
    return not passes(cert, tol) and float(cert.kl) - shift > tol


def _stopped_growing(before: dict, after: dict) -> bool:
    """Two failing sizes in a row whose coresets have the same number of points, fewer than the smaller size:
    the method stopped adding points (OMP: its projected residual is zero), so a larger size builds the same
    coreset again and cannot pass."""
    return after["points"] == before["points"] < before["size"] < after["size"]


def _dim(model: Model, data: Any) -> int:
    from ..core import checks as _checks

    d = _checks.model_dim(model, data)
    return int(d) if d is not None else FIRST_SIZE
