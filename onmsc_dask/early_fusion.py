"""Early fusion ONMSC-EF (paper Eq. 10): block-coordinate descent with L* = I - P Lambda P^T.

Derivation, optimality of every block and cost: docs/early_fusion.md. With G_p^(o) = I - L_p^(o) and
G_mu^(o) = sum_p mu_p G_p^(o) = I - L_mu^(o) (sum mu = 1), P^T P = I and lam = diag(Lambda):

    J = k - sum_i lam_i ||(P^T H)_i||^2 + mu^T R mu - 2 sum_{p,o} mu_p lam^T diag(P^T G_p^(o) P) + O ||lam||^2
        + alpha mu^T M mu,            R_pq = sum_o tr(G_p^(o) G_q^(o)),

so only G_p^(o) times n x k matrices and the v x v trace matrices R, M are needed; no n x n matrix is formed
(``top_eigenvectors`` densifies operators with n <= 500 only).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from .fusion import converged, simplex_qp
from .graph import NormalizedHighOrderAffinity
from .spectral import top_eigenvectors
from .validation import check_lambda

#: floats in each of the two v x n x b arrays of a column block of the exact traces, about 32 MB
TRACE_BLOCK_FLOATS = 2**22


@dataclass
class EarlyFusionResult:
    embedding: np.ndarray  # H, n x k
    view_weights: np.ndarray  # mu, on the simplex
    P: np.ndarray  # n x k, P^T P = I
    Lambda: np.ndarray  # diagonal of Lambda, in [0, 1]^k
    alpha: float  # the alpha used ("auto" resolved)
    objective: list[float] = field(default_factory=list)  # J at the start, then after each iteration
    n_iter: int = 0
    converged: bool = False

    @property
    def affinity_embedding(self) -> np.ndarray:
        """P Lambda: its rows are those of the learned affinity P Lambda P^T up to the isometry P^T, so k-means
        on it clusters the learned affinity (= H = P when every lambda_i is clipped at 1)."""
        return self.P * self.Lambda


def trace_matrices(ops: list[list[NormalizedHighOrderAffinity]]) -> tuple[np.ndarray, np.ndarray]:  # M of Eq. 9
    """Exact R_pq = sum_o tr(G_p^(o) G_q^(o)) and M_pq = sum_o <A_p^o, A_q^o>_F / (||A_p^o||_F ||A_q^o||_F),
    from column blocks A_p^o E_B (n x b), o = 1..O built by repeated sparse products: O(n v O nnz(A)) time."""
    v, O, n = len(ops), len(ops[0]), ops[0][0].shape[0]
    b = int(max(1, min(n, TRACE_BLOCK_FLOATS // (v * n))))
    R, raw = np.zeros((v, v)), np.zeros((O, v, v))
    for start in range(0, n, b):
        cols = np.arange(start, min(n, start + b))
        Y, Gb = np.zeros((v, n, len(cols))), np.empty((v, n, len(cols)))
        Y[:, cols, np.arange(len(cols))] = 1.0  # E_B
        for o in range(O):
            for p in range(v):
                # Eqs. 7 and 3 as graph.NormalizedHighOrderAffinity, on a column block
                Y[p] = ops[p][o].A @ Y[p]  # A_p^(o+1) E_B
                d = ops[p][o].inv_sqrt_degrees
                np.multiply(d[:, None] * Y[p], d[cols], out=Gb[p])  # G_p^(o+1) E_B
            R += Gb.reshape(v, -1) @ Gb.reshape(v, -1).T  # sum over blocks of <G_p E_B, G_q E_B> = tr(G_p G_q)
            raw[o] += Y.reshape(v, -1) @ Y.reshape(v, -1).T
    norms = np.sqrt(np.maximum(np.einsum("opp->op", raw), np.finfo(float).tiny))
    M = (raw / (norms[:, :, None] * norms[:, None, :])).sum(axis=0)
    return (R + R.T) / 2, (M + M.T) / 2


def check_alpha(alpha: float | str) -> float | str:
    """``"auto"`` or a finite alpha >= 0 (validation.check_lambda)."""
    return alpha if isinstance(alpha, str) and alpha == "auto" else check_lambda("alpha", alpha, rules=("auto",))


class EarlyFusionProblem:
    """Eq. 10 on fixed graphs: the exact objective and the exact minimiser of each block."""

    def __init__(self, affinities: Sequence[sp.spmatrix], k: int, order: int, alpha: float | str = "auto",
                 random_state: int | None = None):
        alpha = check_alpha(alpha)
        self.ops = [[NormalizedHighOrderAffinity(A, o) for o in range(1, order + 1)] for A in affinities]
        self.k, self.order, self.n, self.random_state = int(k), int(order), affinities[0].shape[0], random_state
        self.R, self.M = trace_matrices(self.ops)
        # auto: alpha M gets the diagonal scale of R, so diversity and neighbourhood terms weigh alike
        self.alpha = float(np.trace(self.R) / np.trace(self.M)) if alpha == "auto" else alpha

    def combined(self, mu: np.ndarray, H: np.ndarray | None = None) -> LinearOperator:
        """T = sum_{p,o} mu_p G_p^(o) (+ 1/2 H H^T) as an operator."""
        def matmat(X):
            X = X.reshape(self.n, -1)
            out = sum(m * (G @ X) for m, ops in zip(mu, self.ops) if m > 0 for G in ops)
            return out if H is None else out + 0.5 * H @ (H.T @ X)
        return LinearOperator((self.n, self.n), matvec=lambda x: matmat(x).ravel(), matmat=matmat,
                              rmatvec=lambda x: matmat(x).ravel(), dtype=np.float64)

    def compressions(self, P: np.ndarray) -> np.ndarray:
        """c_p = sum_o diag(P^T G_p^(o) P), shape (v, k)."""
        return np.array([sum(np.sum(P * (G @ P), axis=0) for G in ops) for ops in self.ops])

    def objective(self, H: np.ndarray, P: np.ndarray, lam: np.ndarray, mu: np.ndarray) -> float:
        """J of Eq. 10, exactly (formula in the module docstring)."""
        spectral = self.k - lam @ np.sum((P.T @ H) ** 2, axis=1)  # tr(H^T (I - P Lam P^T) H)
        neighbourhood = mu @ self.R @ mu - 2 * mu @ self.compressions(P) @ lam + self.order * lam @ lam
        return float(spectral + neighbourhood + self.alpha * mu @ self.M @ mu)

    def update_h(self, P: np.ndarray) -> np.ndarray:
        """(a) argmin_{H^T H = I} tr(H^T (I - P Lam P^T) H): the top-k eigenvectors of P Lam P^T, i.e. P (for any
        Lam >= 0 of P's columns)."""
        return P.copy()

    def update_p_lambda(self, mu: np.ndarray, H: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(b) argmin over P, Lam given H, mu: P = top-k eigenvectors of T = S_mu + 1/2 H H^T, lam = clip(t / O).
        H=None minimises over H, P, Lam jointly: P = H = top-k of S_mu, lam = clip((s + 1/2) / O)."""
        t, P = top_eigenvectors(self.combined(mu, H), self.k, self.random_state)
        return P, np.clip((t + (0.5 if H is None else 0.0)) / self.order, 0.0, 1.0)

    def update_mu(self, P: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """(c) argmin_{mu in simplex} mu^T (R + alpha M) mu - f^T mu, f_p = 2 sum_o tr(Lam P^T G_p^(o) P)."""
        return simplex_qp(self.R + self.alpha * self.M, 2 * self.compressions(P) @ lam)


def early_fusion(affinities: Sequence[sp.spmatrix], k: int, order: int, alpha: float | str = "auto", *,
                 joint: bool = True, tol: float = 1e-4, max_iter: int = 100,
                 random_state: int | None = None) -> EarlyFusionResult:
    """Minimise Eq. 10 over H, mu, P, Lambda from uniform mu.

    Each iteration: mu (c), then (H, P, Lambda) jointly in closed form (``joint=True``), or (P, Lambda) given
    the previous H (b) followed by H (a) (``joint=False``, the literal alternation, which can stall at
    stationary points of the stale 1/2 H H^T term; docs/early_fusion.md). J is non-increasing either way;
    stops when its relative change is below ``tol``.
    """
    problem = EarlyFusionProblem(affinities, k, order, alpha, random_state)
    mu = np.full(len(affinities), 1.0 / len(affinities))
    P, lam = problem.update_p_lambda(mu)
    H = problem.update_h(P)
    result = EarlyFusionResult(H, mu, P, lam, problem.alpha, [problem.objective(H, P, lam, mu)])
    for it in range(1, max_iter + 1):
        mu = problem.update_mu(P, lam)  # (c)
        P, lam = problem.update_p_lambda(mu, None if joint else H)  # (b), or (a)+(b) jointly
        H = problem.update_h(P)  # (a)
        result.objective.append(problem.objective(H, P, lam, mu))
        result.n_iter = it
        if converged(result.objective[-2], result.objective[-1], tol):
            result.converged = True
            break
    result.embedding, result.view_weights, result.P, result.Lambda = H, mu, P, lam
    return result
