"""Small dense linear systems in pure Python (step-time model fits)."""

from __future__ import annotations

from collections.abc import Sequence


def solve_linear(a: list[list[float]], b: list[float]) -> list[float]:
    """Solve ``a x = b`` by Gauss-Jordan elimination with partial pivoting; the unknown of a
    (numerically) zero pivot is 0."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[piv] = m[piv], m[col]
        if abs(m[col][col]) < 1e-300:
            continue
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * y for x, y in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] if abs(m[i][i]) > 1e-300 else 0.0 for i in range(n)]


def least_squares(rows: Sequence[Sequence[float]], ys: Sequence[float], ridge: float = 0.0) -> list[float]:
    """The x minimizing |rows x - ys|^2 + ridge |x|^2, by the normal equations."""
    k = len(rows[0])
    ata = [[sum(r[a] * r[b] for r in rows) + (ridge if a == b else 0.0) for b in range(k)] for a in range(k)]
    aty = [sum(r[a] * y for r, y in zip(rows, ys, strict=True)) for a in range(k)]
    return solve_linear(ata, aty)
