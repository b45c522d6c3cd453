"""Least squares on a growing set of columns, by a QR factorisation that is updated, not recomputed.

OMP (and Lawson & Hanson's NNLS, whose outer loop OMP's selection is) solves min ||y - A_S z|| on a support S
that grows by one column per step. Solving on the columns by QR, not on the Gram A_S^T A_S, keeps the
condition number kappa(A_S) rather than kappa(A_S)^2: Fisher features of logistic regression have singular
values spanning 1e15, so the Gram route is hopeless in float64 and in float32 alike (issue 11).

Layout, shared by every function here: A_S occupies the first n of k slots, in slot order; Q is (J, k) and R
is (k, k) upper triangular with A_S = Q[:, :n] R[:n, :n]; qty = Q^T y. Slots >= n are padding and are masked.

- `qr_append`: one column more, by classical Gram-Schmidt with one re-orthogonalisation (CGS2, Giraud et al.
  2005: orthogonal to working precision), O(J k).
- `qr_delete`: one column fewer, by Givens rotations, O(k (k + J)).
- `solve_on_support`: z = R^{-1} Q^T y on the first n slots, O(k^2).
- `active_set_nnls`: the inner loop of Lawson-Hanson (1974, ch. 23, steps 6-11) on these pieces.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

__all__ = ["QR", "qr_append", "solve_on_support", "active_set_nnls", "qr_empty", "qr_delete",
           "qr_delete_many"]

Array = jax.Array


class QR(NamedTuple):
    """A_S = Q[:, :count] R[:count, :count]; qty = Q^T y on the same slots. Q is stored transposed, (k, J), so
    that each column of Q is a contiguous row."""

    qt: Array
    r: Array
    qty: Array
    count: Array


def qr_empty(dim: int, capacity: int, dtype) -> QR:
    return QR(jnp.zeros((capacity, dim), dtype), jnp.zeros((capacity, capacity), dtype),
              jnp.zeros(capacity, dtype), jnp.asarray(0, jnp.int32))


def qr_append(f: QR, column: Array, y: Array) -> tuple[QR, Array]:
    """Append `column` at slot `count` (CGS2). Returns the factorisation and the new column's pivot |R_tt|
    relative to ||column||: the caller refuses a column whose pivot is at the rounding level (it lies in the
    span of the support, so it cannot lower the residual and would make R singular)."""
    k = f.r.shape[0]
    t = f.count
    active = jnp.arange(k) < t
    coef = jnp.where(active, f.qt @ column, 0.0)
    resid = column - coef @ f.qt
    again = jnp.where(active, f.qt @ resid, 0.0)  # the second pass restores orthogonality lost to round-off
    resid = resid - again @ f.qt
    coef = coef + again
    rho = jnp.linalg.norm(resid)
    qt = resid / jnp.maximum(rho, jnp.finfo(rho.dtype).tiny)
    r = f.r.at[:, t].set(coef.at[t].set(rho))
    qr = QR(f.qt.at[t].set(qt), r, f.qty.at[t].set(jnp.dot(qt, y)), t + 1)
    return qr, rho / jnp.maximum(jnp.linalg.norm(column), jnp.finfo(rho.dtype).tiny)


def solve_on_support(f: QR) -> Array:
    """argmin_z ||y - A_S z|| on the first `count` slots (0 elsewhere): back-substitution R z = Q^T y."""
    k = f.r.shape[0]
    active = jnp.arange(k) < f.count
    r = jnp.where(active[:, None] & active[None, :], f.r, jnp.eye(k, dtype=f.r.dtype))
    z = solve_triangular(r, jnp.where(active, f.qty, 0.0), lower=False)
    return jnp.where(active, z, 0.0)


def qr_delete(f: QR, slot: Array) -> QR:
    """Remove the column at `slot`; later columns shift left by one (order kept). Deleting a column leaves R
    upper Hessenberg from `slot` on; Givens rotations of rows (j, j+1), j = slot .. count-2, restore it, applied
    to Q's columns and to Q^T y alike (Golub & Van Loan, section 6.5.2). O(k (k + J))."""
    k = f.r.shape[0]
    ar = jnp.arange(k)
    order = jnp.where(ar < slot, ar, jnp.minimum(ar + 1, k - 1))
    r = jnp.where((ar < f.count - 1)[None, :], f.r[:, order], 0.0)

    def rotate(j, c):
        q, r, qty = c
        a, b = r[j, j], r[j + 1, j]
        h = jnp.hypot(a, b)
        use = (j >= slot) & (j < f.count - 1) & (h > 0)
        cs = jnp.where(use, a / jnp.where(h > 0, h, 1.0), 1.0)
        sn = jnp.where(use, b / jnp.where(h > 0, h, 1.0), 0.0)
        rj, rk = r[j], r[j + 1]
        r = r.at[j].set(cs * rj + sn * rk).at[j + 1].set(cs * rk - sn * rj)
        qj, qk = q[j], q[j + 1]
        q = q.at[j].set(cs * qj + sn * qk).at[j + 1].set(cs * qk - sn * qj)
        tj, tk = qty[j], qty[j + 1]
        qty = qty.at[j].set(cs * tj + sn * tk).at[j + 1].set(cs * tk - sn * tj)
        return q, r, qty

    q, r, qty = jax.lax.fori_loop(slot, jnp.maximum(f.count - 1, slot), rotate, (f.qt, r, f.qty))
    return QR(q, jnp.triu(r), qty, f.count - 1)


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


def _compact_order(keep: Array) -> Array:
    return jnp.argsort(jnp.logical_not(keep), stable=True)


def active_set_nnls(columns: Array, y: Array, x: Array, f: QR) -> tuple[Array, Array, QR]:
    """The inner loop of Lawson & Hanson's NNLS (1974, Algorithm 23.10, steps 6-11) on the support of `f`.

    `columns` (J, k) are the support's columns in the input's slot order, `x` is feasible (>= 0 on the first
    f.count slots, 0 elsewhere) and `f` factors those columns of `columns`. Solve the
    unconstrained least squares z on the support; while some z_i <= 0, move from x towards z until the first
    coordinate reaches 0 (the ratio test), drop the coordinates at 0 from the factorisation (`qr_delete_many`)
    and solve again on the smaller support. Each pass drops at least one column, so it ends within count passes
    with x > 0 and least-squares optimal on its support. Returns (x, keep, QR): `x` and `keep` in the input's
    slot order, and the QR of the kept columns compacted to the front in the same (stable) order, so callers
    compact their own slots with `argsort(~keep, stable=True)`.

    Why a second NNLS beside `ops.nnls_gram`: this one works on the columns (condition number kappa, not
    the Gram's kappa^2, which makes Fisher features hopeless there) and is exact, but it is only the inner
    loop: a coordinate it drops does not come back, so alone it does not solve an NNLS on a fixed support.
    OMP supplies the outer loop (its selection) and the growing QR; `nnls_gram` serves the fixed-support
    refits.
    """
    k = x.shape[0]

    def expand(passive, z_compact):  # compact slots -> the input's slots
        return jnp.zeros(k, z_compact.dtype).at[_compact_order(passive)].set(z_compact)

    def cond(c):
        return ~c[3] & (c[4] <= k)

    def body(c):
        x, passive, f, _, it = c
        z = jnp.where(passive, expand(passive, solve_on_support(f)), 0.0)
        # one step of iterative refinement on the true residual: recovers the accuracy that the updated Q's
        # loss of orthogonality costs in float32 (Bjorck 1967)
        resid = y - columns @ z
        z = z + jnp.where(passive, expand(passive, solve_on_support(f._replace(qty=f.qt @ resid))), 0.0)
        bad = passive & (z <= 0)
        feasible = ~jnp.any(bad)
        ratio = jnp.where(bad, x / jnp.where(bad, x - z, 1.0), jnp.inf)
        first = jnp.argmin(ratio)
        alpha = jnp.clip(ratio[first], 0.0, 1.0)
        x_next = jnp.where(passive, jnp.maximum(x + alpha * (z - x), 0.0), 0.0).at[first].set(0.0)
        keep = passive & (x_next > 0)
        # the dropped coordinates, in compact slot numbering
        drop = (passive & ~keep)[_compact_order(passive)]
        f = jax.lax.cond(feasible, lambda: f, lambda: qr_delete_many(f, drop))
        return (jnp.where(feasible, z, x_next), jnp.where(feasible, passive, keep), f, feasible, it + 1)

    passive = jnp.arange(k) < f.count
    x = jnp.where(passive, jnp.maximum(x, 0.0), 0.0)
    x, keep, f, _, _ = jax.lax.while_loop(cond, body, (x, passive, f, jnp.asarray(False), jnp.asarray(0)))
    return x, keep, f
