"""Least squares on a growing set of columns, by a QR factorisation that is updated, not recomputed.

OMP (and Lawson & Hanson's NNLS, whose outer loop OMP's selection is) solves min ||y - A_S z|| on a support S
that grows by one column per step. Solving on the columns by QR, not on the Gram A_S^T A_S, keeps the
condition number kappa(A_S) rather than kappa(A_S)^2: Fisher features of logistic regression have singular
values spanning 1e15, so the Gram route is hopeless in float64 and in float32 alike (issue 11).

Layout, shared by every function here: A_S occupies the first n of k slots, in slot order; Q is (J, k) and R
is (k, k) upper triangular with A_S = Q[:, :n] R[:n, :n]; qty = Q^T y. Slots >= n are padding and are masked;
R's padding columns are those of the identity, so a triangular solve over all k slots needs no masked copy of
R (with a right-hand side that is 0 on the padding, the padding's solution is 0).

- `qr_append`: one column more, by classical Gram-Schmidt with one re-orthogonalisation (CGS2, Giraud et al.
  2005: orthogonal to working precision), O(J k).
- `qr_delete`: one column fewer, by Givens rotations, O(k (k + J)).
- `solve_on_support`: z = R^{-1} Q^T y on the first n slots, O(k^2).
- `active_set_nnls`: the inner loop of Lawson-Hanson (1974, ch. 23, steps 6-11) on these pieces.
- `round_nearest_plane`: weights kept as pairs, rounded to the working dtype along R (Babai).

Compensated arithmetic (issue 34): the residual y - A_S z of a good fit is far smaller than the terms it
cancels (for Fisher features sum_n w_n ||v_n|| ~ 40 ||y||), so in float32 it is mostly rounding, and so were
the weights, OMP's selection and its stopping. `two_sum` and `two_prod` are error-free transformations
(Knuth; Dekker, rearranged so that a compiler's fused multiply-adds cannot break it); `residual_pair` and
`dot_rows` build on them the residual and A^T r to ~eps^2, as pairs (hi, lo) in the working dtype. No float64
is needed, so all of it works with x64 off (JAX's default). Cost O(count J) per call, on the support rows only.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Appended", "QR", "qr_append", "qr_commit", "qr_orthogonalize", "solve_on_support", "solve_upper", "active_set_nnls", "qr_empty", "qr_delete",
           "qr_delete_many", "two_sum", "two_prod", "residual", "residual_pair", "dot_rows",
           "round_nearest_plane"]

Array = jax.Array


# --------------------------------------------------------------------------------------------------------
# Compensated ("double-float") arithmetic for the small algebra, in the working dtype: no float64 is needed,
# so it works with x64 off. A value is a pair (hi, lo) with hi = fl(hi + lo).


def two_sum(a: Array, b: Array) -> tuple[Array, Array]:
    """(s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum: no branch, any |a|, |b|)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a: Array) -> tuple[Array, Array]:
    """a = hi + lo exactly, each with at most half the significand (12 of float32's 24 bits, 26 of float64's
    53), so that products of halves are exact. `reduce_precision` rounds in one HLO op, so the split holds
    where a compiler contracts a * b - c into a fused multiply-add (Veltkamp's (2^s + 1) a - ((2^s + 1) a - a)
    would break there)."""
    fi = jnp.finfo(a.dtype)
    hi = jax.lax.reduce_precision(a, exponent_bits=fi.nexp, mantissa_bits=(fi.nmant + 1) // 2 - 1)
    return hi, a - hi


def two_prod(a: Array, b: Array) -> tuple[Array, Array]:
    """(p, e) with p ~ fl(a b) and p + e = a b up to ~eps^2 |a b| (Dekker's TwoProduct, rearranged).

    a b is the sum of the four products of the halves (`_split`), each exact, added by `two_sum`. Every
    multiplication here is exact, so the result does not depend on whether the compiler contracts a product
    and an addition into a fused multiply-add. XLA's CPU and GPU code generators do, and Dekker's form, whose
    e = ((ah bh - p) + ...) reuses the rounded p = fl(a b), then sees the exact product in one place and the
    rounded one in another (measured: errors of 1e-5 relative under jit, none eagerly; an optimisation
    barrier around p is removed by XLA's CPU pipeline)."""
    ah, al = _split(a)
    bh, bl = _split(b)
    s, e1 = two_sum(ah * bh, ah * bl)
    p, e2 = two_sum(s, al * bh)
    return p, (e1 + e2) + al * bl


def _df_add(hi: Array, lo: Array, b: Array) -> tuple[Array, Array]:
    """(hi, lo) + b as a normalised pair."""
    s, e = two_sum(hi, b)
    e = e + lo
    h = s + e
    return h, e - (h - s)


_FAN = 16  # terms added in sequence per level of `_sum_pair`


def _sum_pair(terms: Array, errs: Array, lo: Array, axis: int = 0) -> tuple[Array, Array]:
    """sum of `terms` + sum of `errs` + lo along `axis` (0 or 1) as a normalised pair (hi, lo). Each level
    adds up to _FAN slices in sequence by `two_sum` (one fused loop per level: few levels, few operations),
    carrying the rounding errors beside the terms with `errs` (small: added plainly)."""
    def part(a, i, w):
        return a[i * w:(i + 1) * w] if axis == 0 else a[:, i * w:(i + 1) * w]

    n = terms.shape[axis]
    while n > 1:
        g = min(_FAN, n)
        m = -(-n // g) * g
        if m != n:
            shape = list(terms.shape)
            shape[axis] = m - n
            pad = jnp.zeros(shape, terms.dtype)
            terms, errs = jnp.concatenate([terms, pad], axis), jnp.concatenate([errs, pad], axis)
        w = m // g
        acc, acc_e = part(terms, 0, w), part(errs, 0, w)
        for i in range(1, g):
            acc, err = two_sum(acc, part(terms, i, w))
            acc_e = acc_e + (part(errs, i, w) + err)
        terms, errs, n = acc, acc_e, w
    first = (lambda a: a[0]) if axis == 0 else (lambda a: a[:, 0])
    return two_sum(first(terms), lo + first(errs))


_CHUNK = 16  # rows per step of the compensated products' loop


def _chunk_loop(k: int, bound: Array | None, body, init):
    """fori_loop(body) over chunks of c = min(_CHUNK, k) rows, as many as the first `bound` rows need (a
    traced trip count: the cost is O(count J), not O(k J); a support is often far below its capacity, ~40
    of 100 rows on logistic Fisher features). body(start, first, acc): the chunk is rows [start, start + c),
    start <= k - c; rows before `first` were done by the previous chunk (the last chunk overlaps instead of
    reading past k, so that no padded copy is made)."""
    c = min(_CHUNK, k)
    n = -(-k // c) if bound is None else (jnp.minimum(bound, k) + c - 1) // c

    def step(i, acc):
        return body(jnp.minimum(i * c, k - c), i * c, acc)

    return c, jax.lax.fori_loop(0, n, step, init)


def residual_pair(y: Array, rows: Array, x: Array, x_lo: Array | None = None, r: Array | None = None,
                  r_lo: Array | None = None, bound: Array | None = None) -> tuple[Array, Array]:
    """y - rows^T (x + x_lo) - (r + r_lo) (rows (k, J); x, x_lo (k,); y, r, r_lo (J,)) as a pair (hi, lo)
    accurate to about eps^2 (||y|| + sum_n |x_n| ||v_n||): every product is split exactly (`two_prod`), the
    terms are added by `two_sum` (`_sum_pair`), and the rounding errors (and the low parts' products) are
    summed on the side. `bound`: x is 0 from that slot on (only those rows are read).

    Why: the plain y - rows^T x loses eps sum_n |x_n| ||v_n||, which for Fisher features is ~40 eps ||y||;
    OMP's weights and selection then stall at that level (module docstring of `omp`). Cost O(k J), some 40
    flops per entry, on data that fits in cache."""
    k = x.shape[0]
    rows = rows.astype(x.dtype)
    lo = jnp.zeros_like(y) if x_lo is None else -(x_lo @ rows)
    if r_lo is not None:
        lo = lo - r_lo
    hi = y
    if r is not None:
        hi, e = two_sum(y, -r)
        lo = lo + e

    def body(start, first, acc):
        hi, lo = acc
        idx = start + jnp.arange(min(_CHUNK, k))
        xc = jnp.where(idx >= first, jax.lax.dynamic_slice_in_dim(x, start, idx.shape[0]), 0.0)
        p, e = two_prod(-xc[:, None], jax.lax.dynamic_slice_in_dim(rows, start, idx.shape[0]))
        s, l = _sum_pair(p, e, jnp.zeros_like(hi))
        hi, e = two_sum(hi, s)
        return hi, lo + (l + e)

    _, (hi, lo) = _chunk_loop(k, bound, body, (hi, lo))
    return two_sum(hi, lo)


def residual(y: Array, rows: Array, x: Array, x_lo: Array | None = None) -> Array:
    """y - rows^T (x + x_lo), rounded once from `residual_pair`."""
    return residual_pair(y, rows, x, x_lo)[0]


def dot_rows(rows: Array, r: Array, r_lo: Array | None = None, bound: Array | None = None) -> Array:
    """rows @ (r + r_lo) (rows (k, J); r, r_lo (J,), or (k, J) for row-wise products), each of the k dot
    products accurate to about eps^2 sum_j |a_j r_j|, then rounded once. `bound`: only the rows before it
    are needed (the others come back 0). Cost O(k J).

    Each chunk is summed along J as a (J, c) block (`_sum_pair` on axis 0, contiguous slices): the same
    additions in the same order as along axis 1 of (c, J), 1.7x faster."""
    k = rows.shape[0]
    rows = rows.astype(r.dtype)
    c = min(_CHUNK, k)

    def chunk(a, start):  # (J, c) or (J, 1)
        return a[:, None] if a.ndim == 1 else jax.lax.dynamic_slice_in_dim(a, start, c).T

    def body(start, first, out):
        a = jax.lax.dynamic_slice_in_dim(rows, start, c).T
        p, e = two_prod(a, chunk(r, start))
        lo = jnp.zeros(c, r.dtype) if r_lo is None else jnp.sum(a * chunk(r_lo, start), axis=0)
        return jax.lax.dynamic_update_slice_in_dim(out, _sum_pair(p, e, lo, axis=0)[0], start, 0)

    return _chunk_loop(k, bound, body, jnp.zeros(k, r.dtype))[1]


class QR(NamedTuple):
    """A_S = Q[:, :count] R[:count, :count]; qty = Q^T y on the same slots. Q is stored transposed, (k, J), so
    that each column of Q is a contiguous row."""

    qt: Array
    r: Array
    qty: Array
    count: Array


def qr_empty(dim: int, capacity: int, dtype) -> QR:
    return QR(jnp.zeros((capacity, dim), dtype), jnp.eye(capacity, dtype=dtype), jnp.zeros(capacity, dtype),
              jnp.asarray(0, jnp.int32))


def solve_upper(r: Array, b: Array, transpose: bool = False) -> Array:
    """R^{-1} b (or R^{-T} b) for R (k, k) upper triangular with a non-zero diagonal. Passed to LAPACK as
    the lower triangle of R^T, which is R's own buffer read column-major: solving with R itself made XLA
    copy R into column-major order first (11 ms against 1 ms at k = 2,000)."""
    return jax.lax.linalg.triangular_solve(r.T, b[:, None], left_side=True, lower=True,
                                           transpose_a=not transpose)[:, 0]


class Appended(NamedTuple):
    """A column orthogonalised against a factorisation (`qr_orthogonalize`), before it is written into it:
    its coefficients on Q's columns, its unit direction orthogonal to them and its norm there (rho), and
    rho relative to the column's norm (its pivot)."""

    coef: Array
    direction: Array
    rho: Array
    pivot: Array


def qr_orthogonalize(f: QR, column: Array) -> Appended:
    """`column` against Q's first `count` columns by classical Gram-Schmidt with one re-orthogonalisation
    (CGS2, Giraud et al. 2005: orthogonal to working precision), O(J k). Reads `f` only."""
    k = f.r.shape[0]
    active = jnp.arange(k) < f.count
    coef = jnp.where(active, f.qt @ column, 0.0)
    resid = column - coef @ f.qt
    again = jnp.where(active, f.qt @ resid, 0.0)  # the second pass restores orthogonality lost to round-off
    resid = resid - again @ f.qt
    coef = coef + again
    rho = jnp.linalg.norm(resid)
    direction = resid / jnp.maximum(rho, jnp.finfo(rho.dtype).tiny)
    return Appended(coef, direction, rho, rho / jnp.maximum(jnp.linalg.norm(column), jnp.finfo(rho.dtype).tiny))


def qr_commit(f: QR, a: Appended, y: Array, take: Array = True) -> QR:
    """`f` with the orthogonalised column `a` in slot `count` where `take` holds, else `f` unchanged. Only
    slot `count`'s row of Q, column of R and entry of Q^T y are written (in place)."""
    t = f.count
    take = jnp.asarray(take)
    qt = f.qt.at[t].set(jnp.where(take, a.direction, f.qt[t]))
    r = f.r.at[:, t].set(jnp.where(take, a.coef.at[t].set(a.rho), f.r[:, t]))
    qty = f.qty.at[t].set(jnp.where(take, jnp.dot(a.direction, y), f.qty[t]))
    return QR(qt, r, qty, t + take.astype(t.dtype))


def qr_append(f: QR, column: Array, y: Array) -> tuple[QR, Array]:
    """Append `column` at slot `count` (CGS2, `qr_orthogonalize`). Returns the factorisation and the new column's
    pivot |R_tt| relative to ||column||: the caller refuses a column whose pivot is at the rounding level (it
    lies in the span of the support, so it cannot lower the residual and would make R singular)."""
    a = qr_orthogonalize(f, column)
    return qr_commit(f, a, y), a.pivot


def solve_on_support(f: QR) -> Array:
    """argmin_z ||y - A_S z|| on the first `count` slots (0 elsewhere): back-substitution R z = Q^T y."""
    active = jnp.arange(f.r.shape[0]) < f.count
    return jnp.where(active, solve_upper(f.r, jnp.where(active, f.qty, 0.0)), 0.0)


def qr_delete(f: QR, slot: Array) -> QR:
    """Remove the column at `slot`; later columns shift left by one (order kept). Deleting a column leaves R
    upper Hessenberg from `slot` on; Givens rotations of rows (j, j+1), j = slot .. count-2, restore it, applied
    to Q's columns and to Q^T y alike (Golub & Van Loan, section 6.5.2). O(k (k + J)).

    Rotation j makes row j final and changes row j + 1, which then meets row j + 2: the loop carries that
    row and writes each final row once into a fresh array, reading the old ones, so no rotation copies the
    whole of Q or R (in place, XLA copied both at every rotation: 0.6 ms each at k = 800, J = 1325)."""
    k = f.r.shape[0]
    ar = jnp.arange(k)
    # columns after `slot` move one left: a select against R rolled by one (a gather of columns is 7x slower)
    r = jnp.where((ar < slot)[None, :], f.r, jnp.roll(f.r, -1, axis=1))
    r = jnp.where((ar < f.count - 1)[None, :], r, 0.0)
    stop = jnp.maximum(f.count - 1, slot)  # rows slot .. stop - 1 are rotated

    def rotate(j, c):
        out_q, out_r, out_t, cq, cr, ct = c  # cq, cr, ct: row j as rotations so far left it
        nq, nr, nt = f.qt[j + 1], r[j + 1], f.qty[j + 1]
        a, b = cr[j], nr[j]
        h = jnp.hypot(a, b)
        use = h > 0
        cs = jnp.where(use, a / jnp.where(use, h, 1.0), 1.0)
        sn = jnp.where(use, b / jnp.where(use, h, 1.0), 0.0)
        out_q = jax.lax.dynamic_update_index_in_dim(out_q, cs * cq + sn * nq, j, 0)
        out_r = jax.lax.dynamic_update_index_in_dim(out_r, cs * cr + sn * nr, j, 0)
        out_t = out_t.at[j].set(cs * ct + sn * nt)
        return out_q, out_r, out_t, cs * nq - sn * cq, cs * nr - sn * cr, cs * nt - sn * ct

    last = jnp.minimum(stop, k - 1)
    first = jnp.minimum(slot, k - 1)
    init = (f.qt, r, f.qty, f.qt[first], r[first], f.qty[first])
    q, r, qty, cq, cr, ct = jax.lax.fori_loop(slot, stop, rotate, init)
    # the row the last rotation left behind (row stop, or row slot when nothing was rotated)
    keep = stop > slot
    q = jax.lax.dynamic_update_index_in_dim(q, jnp.where(keep, cq, q[last]), last, 0)
    r = jax.lax.dynamic_update_index_in_dim(r, jnp.where(keep, cr, r[last]), last, 0)
    qty = qty.at[last].set(jnp.where(keep, ct, qty[last]))
    padding = ar >= f.count - 1
    return QR(q, jnp.where(padding[None, :], jnp.eye(k, dtype=r.dtype), jnp.triu(r)), qty, f.count - 1)


def qr_delete_many(f: QR, drop: Array) -> QR:
    """Remove every column whose slot is marked in `drop` (a boolean mask over slots), highest slot first so
    that the lower marked slots do not move."""
    k = drop.shape[0]

    def cond(c):
        return jnp.any(c[1])

    def body(c):
        f, drop = c
        slot = k - 1 - jnp.argmax(drop[::-1])
        return qr_delete(f, slot), drop.at[slot].set(False)

    return jax.lax.while_loop(cond, body, (f, drop & (jnp.arange(k) < f.count)))[0]


def round_nearest_plane(r: Array, x: Array, x_lo: Array, count: Array) -> Array:
    """The pair x + x_lo rounded to the working dtype so that A x stays close to A (x + x_lo), A = Q R on the
    first `count` slots: Babai's nearest-plane rounding, from the last slot to the first, each coordinate
    rounded after absorbing the rounding errors of the later ones, (sum_{j>i} R_ij (x_j + x_lo_j - out_j)) /
    R_ii. The error it leaves is sum_i R_ii delta_i q_i, |delta_i| <= ulp(x_i) / 2: the later slots of an
    OMP support, whose pivots R_ii are small, add little. Plain rounding leaves sum_i delta_i a_i instead,
    which for Fisher features is ~eps sum_i |x_i| ||a_i||. Measured on logistic Fisher features (N = 5000,
    J = 200, M = 100): float64 OMP weights 4.47e-7, rounded to float32 5.26e-7, this rounding (exact R)
    4.48e-7; in float32 OMP, with its float32 R, 4.94e-7 rounded, 4.61e-7 this, 4.53e-7 the pair (on three
    other seeds within 1% of plain rounding). O(k^2)."""
    k = x.shape[0]
    ar = jnp.arange(k)

    def body(t, out):
        i = k - 1 - t
        later = (ar > i) & (ar < count)
        d = jnp.where(later, (x - out) + x_lo, 0.0)
        rii = r[i, i]
        shift = jnp.dot(r[i], d) / jnp.where(rii != 0, rii, 1.0)
        val = x[i] + (x_lo[i] + shift)
        ok = (i < count) & (rii != 0) & (val > 0)
        return out.at[i].set(jnp.where(ok, val, x[i]))

    return jax.lax.fori_loop(0, k, body, x)


def _compact_order(keep: Array) -> Array:
    return jnp.argsort(jnp.logical_not(keep), stable=True)


def active_set_nnls(columns: Array, y: Array, x: Array, f: QR, x_lo: Array | None = None,
                    refine: int = 8, r0: tuple[Array, Array] | None = None,
                    appended_only: bool = False) -> tuple[Array, Array, QR]:
    """The inner loop of Lawson & Hanson's NNLS (1974, Algorithm 23.10, steps 6-11) on the support of `f`.

    `columns` (J, k) are the support's columns in the input's slot order (or a function returning them), `x`
    is feasible (>= 0 on the first
    f.count slots, 0 elsewhere) and `f` factors those columns of `columns`. Solve the
    unconstrained least squares z on the support; while some z_i <= 0, move from x towards z until the first
    coordinate reaches 0 (the ratio test), drop the coordinates at 0 from the factorisation (`qr_delete_many`)
    and solve again on the smaller support. Each pass drops at least one column, so it ends within count passes
    with x > 0 and least-squares optimal on its support. Returns (x, keep, QR): `x` and `keep` in the input's
    slot order, and the QR of the kept columns compacted to the front in the same (stable) order, so callers
    compact their own slots with `argsort(~keep, stable=True)`. With `x_lo` (the low part of a pair) it
    returns the pair and the residual y - A x as a pair, (x, x_lo, keep, QR, (r, r_lo)); `r0` is the residual
    pair of the x given, if known.

    Each pass solves the least squares from x: one step in the working precision, z = x + R^{-1} Q^T r
    (accurate to ~eps kappa), then iterative refinement of the augmented system [I A; A^T 0] [r; z] = [y; 0]
    (Bjorck 1967) with both residuals, f = y - r - A z and g = -A^T r, compensated (`residual_pair`,
    `dot_rows`) and z, r kept as pairs (hi, lo): dz = R^{-1} (Q^T f - R^{-T} g), dr = f - Q (Q^T f - R^{-T} g),
    until dr is below eps ||r||, a step fails to halve, or `refine` steps (one only when the first step
    already left the feasible set: it decides which coordinate reaches 0 first). `refine = 0` keeps to the
    working precision throughout: the first step only, and after the ratio test the residual of
    x + alpha (z - x) as r_x + alpha (r_z - r_x), so the columns are never read. `appended_only` (with
    `r0`): r0 is the residual of a least-squares fit on every column but the last (one column was just
    appended), so the first pass's Q^T r0 has one entry and reads one column of Q, not all of them. Each step shrinks the error
    by about eps kappa(A_S D) (D any column scaling), so z converges below the working precision. Refining z
    alone, z += R^{-1} Q^T (y - A z), stops at eps kappa(A) ||r|| / ||A z|| relative, whatever the precision
    of the residual, because the stored Q spans A's columns only to eps: measured 1e-3 in float32 on
    logistic Fisher features (kappa 5e7).

    Why a second NNLS beside `ops.nnls_gram`: this one works on the columns (condition number kappa, not
    the Gram's kappa^2, which makes Fisher features hopeless there) and is exact, but it is only the inner
    loop: a coordinate it drops does not come back, so alone it does not solve an NNLS on a fixed support.
    OMP supplies the outer loop (its selection) and the growing QR; `nnls_gram` serves the fixed-support
    refits.
    """
    pair = x_lo is not None
    k = x.shape[0]
    # `columns` may be a function that returns them: then they are gathered only where needed (with
    # refine = 0, after a column is dropped)
    rows_of = (lambda: columns().T) if callable(columns) else (lambda: columns.T)
    ar = jnp.arange(k)

    def expand(passive, z_compact):  # compact slots -> the input's slots
        return jnp.zeros(k, z_compact.dtype).at[_compact_order(passive)].set(z_compact)

    def least_squares(passive, f, z, z_lo, r, r_lo, first=False):
        """The least squares on the passive set from z (0 elsewhere) and its residual pair (r, r_lo): one
        plain step, then compensated ones (docstring above). Returns (z, z_lo, r, r_lo)."""
        active = ar < f.count
        eps = jnp.finfo(x.dtype).eps
        order = _compact_order(passive)

        def correction(z, z_lo, r, r_lo):
            rows = rows_of()
            res, _ = residual_pair(y, rows, z, z_lo, r, r_lo, bound)  # f = y - r - A z
            g = jnp.where(passive, -dot_rows(rows, r, r_lo, bound), 0.0)[order]  # -A^T r, compact
            u = solve_upper(f.r, jnp.where(active, g, 0.0), transpose=True)
            d = jnp.where(active, f.qt @ res, 0.0) - u
            dz = jnp.where(passive, expand(passive, solve_upper(f.r, d)), 0.0)
            return dz, res - d @ f.qt

        def go(c):
            return c[6]

        def step(c):
            z, z_lo, r, r_lo, dz, dr, _, size, it, limit = c
            z, z_lo = _df_add(z, z_lo, dz)
            r, r_lo = _df_add(r, r_lo, dr)
            dz_next, dr_next = correction(z, z_lo, r, r_lo)
            size_next = jnp.max(jnp.abs(dz_next))
            shrinks = size_next <= 0.5 * size
            # converged: the next correction moves the residual by less than its rounding
            more = shrinks & (jnp.linalg.norm(dr_next) > eps * jnp.linalg.norm(r)) & (it + 1 < limit)
            # a correction that does not shrink is not applied (refinement has stalled or diverges)
            return (z, z_lo, r, r_lo, jnp.where(shrinks, dz_next, 0.0), jnp.where(shrinks, dr_next, 0.0), more,
                    size_next, it + 1, limit)

        # first step in working precision (the classical z += R^{-1} Q^T r): cheap, and accurate to eps kappa
        if appended_only and first:  # r is orthogonal to all columns but the last: Q^T r has one entry
            last = jnp.maximum(f.count - 1, 0)
            c_last = jnp.where(f.count > 0, jnp.dot(f.qt[last], r), 0.0)
            c = jnp.where(ar == last, c_last, 0.0)
            dr = c_last * f.qt[last]
        else:
            c = jnp.where(active, f.qt @ r, 0.0)
            dr = c @ f.qt
        dz = jnp.where(passive, expand(passive, solve_upper(f.r, c)), 0.0)
        z, z_lo = _df_add(z, z_lo, dz)
        r, r_lo = _df_add(r, r_lo, -dr)
        if refine < 1:
            return z, z_lo, r, r_lo
        # a solution that goes infeasible gets one compensated step (enough to tell which coordinate
        # reaches 0 first: the next pass moves away from it anyway), a feasible one up to `refine`
        limit = jnp.where(jnp.any(passive & (z <= 0)), 1, refine)
        c = (z, z_lo, r, r_lo, jnp.zeros_like(z), jnp.zeros_like(r), jnp.asarray(True),
             jnp.asarray(jnp.inf, z.dtype), jnp.asarray(0), limit)
        z, z_lo, r, r_lo, dz, dr = jax.lax.while_loop(go, step, c)[:6]
        z, z_lo = _df_add(z, z_lo, dz)
        r, r_lo = _df_add(r, r_lo, dr)
        return z, z_lo, r, r_lo

    def cond(c):
        return ~c[4] & (c[5] <= k)

    def body(c):
        x, x_lo, passive, f, _, it, r, r_lo = c
        if refine < 1:  # the carried residual is that of x (below): recomputed only without a given r0
            if r0 is None:
                r, r_lo = jax.lax.cond(it == 0, lambda: residual_of(x, x_lo), lambda: (r, r_lo))
        elif r0 is None:
            r, r_lo = residual_of(x, x_lo)
        else:  # the caller's residual of x on the first pass; x moved on later passes
            r, r_lo = jax.lax.cond(it == 0, lambda: (r, r_lo), lambda: residual_of(x, x_lo))
        r_x = r
        if appended_only:  # the caller's r0 is the residual of a fit on all columns but the last
            z, z_lo, r, r_lo = jax.lax.cond(it == 0, lambda: least_squares(passive, f, x, x_lo, r, r_lo, True),
                                            lambda: least_squares(passive, f, x, x_lo, r, r_lo))
        else:
            z, z_lo, r, r_lo = least_squares(passive, f, x, x_lo, r, r_lo)
        bad = passive & (z <= 0)
        feasible = ~jnp.any(bad)
        ratio = jnp.where(bad, x / jnp.where(bad, x - z, 1.0), jnp.inf)
        first = jnp.argmin(ratio)
        alpha = jnp.clip(ratio[first], 0.0, 1.0)
        x_next = jnp.where(passive, jnp.maximum(x + alpha * (z - x), 0.0), 0.0).at[first].set(0.0)
        keep = passive & (x_next > 0)
        # the dropped coordinates, in compact slot numbering
        drop = (passive & ~keep)[_compact_order(passive)]
        f = jax.lax.cond(feasible, lambda f: f, lambda f: qr_delete_many(f, drop), f)
        if refine < 1:  # the residual of x_next = x + alpha (z - x) without gathering the columns
            r = jnp.where(feasible, r, r_x + alpha * (r - r_x))
        return (jnp.where(feasible, z, x_next), jnp.where(feasible, z_lo, 0.0), jnp.where(feasible, passive, keep),
                f, feasible, it + 1, r, r_lo)

    def residual_of(x, x_lo):  # y - A x: compensated, or in the working precision alone (refine = 0)
        if refine < 1:
            return y - (x + x_lo) @ rows_of(), jnp.zeros_like(y)
        return residual_pair(y, rows_of(), x, x_lo, bound=bound)

    passive = ar < f.count
    bound = f.count  # the passive slots only shrink from here
    x_lo = jnp.zeros_like(x) if x_lo is None else x_lo
    x_lo = jnp.where(passive & (x > 0), x_lo, 0.0)
    x = jnp.where(passive, jnp.maximum(x, 0.0), 0.0)
    r0_pair = (jnp.zeros_like(y), jnp.zeros_like(y)) if r0 is None else r0
    # each infeasible pass drops a column, so a feasible solve (at the latest on the empty support) comes
    # within count + 1 <= k + 1 passes, and r is the residual of the x returned
    x, x_lo, keep, f, _, _, r, r_lo = jax.lax.while_loop(
        cond, body, (x, x_lo, passive, f, jnp.asarray(False), jnp.asarray(0), *r0_pair))
    return (x, x_lo, keep, f, (r, r_lo)) if pair else (x, keep, f)
