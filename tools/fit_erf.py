#!/usr/bin/env python3
"""Fits the rational erf of fusion/ops/lower.cpp (vector_erf): erf(x) ~ x P(x^2) / Q(x^2) on
[0, 4], P of degree 6 and Q of degree 4 in x^2, Q(0) = 1, by iteratively reweighted linear
least squares (Lawson's weights, so the fit tends to the minimax one). Past |x| = 4, erf is
1 - 1.5e-8 and clamping x costs nothing in f32.

    python tools/fit_erf.py    # needs numpy; prints the coefficients and the errors
"""
import math

import numpy as np

CLAMP, NP, NQ = 4.0, 7, 5


def fit():
    x = np.linspace(1e-4, CLAMP, 8001)
    y = np.array([math.erf(v) for v in x])
    t = x * x
    weights, q_prev, best = np.ones_like(x), np.ones_like(x), None
    for _ in range(60):
        # x P(t) - y (Q(t) - 1) = y, linear in P's and Q's coefficients; divided by the last
        # Q so the residual approximates the rational's error.
        a = np.hstack([x[:, None] * t[:, None] ** np.arange(NP),
                       -y[:, None] * t[:, None] ** np.arange(1, NQ)])
        w = np.sqrt(weights) / np.abs(q_prev)
        sol = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)[0]
        p, q = sol[:NP], np.concatenate([[1.0], sol[NP:]])
        q_val = np.polyval(q[::-1], t)
        err = x * np.polyval(p[::-1], t) / q_val - y
        if (q_val > 0).all() and (best is None or np.abs(err).max() < best[0]):
            best = (np.abs(err).max(), p.copy(), q.copy())
        weights = weights * np.abs(err)
        weights /= weights.sum()
        q_prev = q_val
    return best


def eval_f32(p, q, x):
    """As lower.cpp evaluates it: f32, Horner from the highest coefficient."""
    x = np.clip(x.astype(np.float32), -CLAMP, CLAMP)
    t = x * x
    pv, qv = np.float32(p[-1]), np.float32(q[-1])
    for c in p[-2::-1]:
        pv = pv * t + np.float32(c)
    for c in q[-2::-1]:
        qv = qv * t + np.float32(c)
    return x * pv / qv


def main():
    err64, p, q = fit()
    xs = np.linspace(-12, 12, 24 * 4096 + 1).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in xs])
    err32 = np.abs(eval_f32(p, q, xs).astype(np.float64) - want)
    print(f"max |error| in f64 {err64:.3g}, evaluated in f32 {err32.max():.3g} "
          f"(at x = {xs[err32.argmax()]:.4f})")
    print("P, highest first:", ", ".join(f"{v:.10g}f" for v in p[::-1]))
    print("Q, highest first:", ", ".join(f"{v:.10g}f" for v in q[::-1]))


if __name__ == "__main__":
    main()
