"""Late fusion (paper Algorithm 1): alternate H*, W_p^(o) and mu; touches only n x k matrices (here k is the
embedding width, the columns of H: the number of clusters, or n_components).

Objective (Eq. 11), maximised:
    J = tr(H*^T S) + lambda1 tr(H*^T F) - lambda2 mu^T M mu,   S = sum_{p,o} mu_p H_p^(o) W_p^(o)
with H*^T H* = I, W^T W = I, mu on the simplex. Each block update is an exact maximiser, so J never
decreases. M is the rotation-invariant alignment M_pq = sum_o ||H_p^(o)T H_q^(o)||_F^2 / k (the alignment of
the projections H H^T, as the paper's early-fusion M aligns affinities); the paper's literal
tr(H_p^T H_q) changes with the arbitrary signs of eigenvectors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .validation import user_warning, view_label


#: largest condition number of a tall C that polar factors through C^T C (error about cond^2 x 1e-16 <= 1e-8)
GRAM_POLAR_MAX_COND = 1e4


def polar(C: np.ndarray) -> np.ndarray:
    """argmax_{Q^T Q = I} tr(Q^T C) = U V^T from the thin SVD C = U S V^T; a tall, well-conditioned float64 C as
    C (C^T C)^-1/2 (:func:`_gram_polar_transform`): two n x k passes instead of an n x k SVD (0.15 s against 1.8 s for
    1M x 20)."""  # Eq. 13
    R = _gram_polar_transform(C)
    if R is not None:
        return C @ R
    U, _, Vt = np.linalg.svd(C, full_matrices=False)
    return U @ Vt


def polar_transform(T: np.ndarray) -> np.ndarray:
    """R with polar(T) = T R (H* = T R of new rows' T): :func:`_gram_polar_transform`'s, else V diag(1/sigma) V^T
    from the SVD T = U diag(sigma) V^T, whose sigma and V are those of T's width x width QR factor (no n x width
    U, nor the SVD's n x width buffers)."""
    R = _gram_polar_transform(T)
    if R is not None:
        return R
    _, sigma, Vt = np.linalg.svd(np.linalg.qr(T, mode="r"))
    return (Vt.T / np.maximum(sigma, np.finfo(float).tiny)) @ Vt


def _gram_polar_transform(C: np.ndarray) -> np.ndarray | None:
    """(C^T C)^-1/2 from the k x k eigenproblem of C^T C for a tall float64 C; None for any other C, or when C's
    condition number exceeds GRAM_POLAR_MAX_COND."""
    if C.shape[0] <= C.shape[1] or C.dtype != np.float64:
        return None
    w, V = np.linalg.eigh(C.T @ C)
    return (V / np.sqrt(w)) @ V.T if w[0] > w[-1] / GRAM_POLAR_MAX_COND**2 else None


def alignment_matrix(H: np.ndarray | ScaledViews) -> np.ndarray:
    """M_pq = sum_o ||H_p^(o)T H_q^(o)||_F^2 / k for H of shape (v, O, n, k) or ScaledViews; PSD (a Gram matrix),
    M_pp = O when the H_p^(o) are orthonormal (bare eigenvectors)."""  # M of Eq. 11, rotation-invariant (see above)
    H = scaled_views(H)
    v, O, _, k = H.shape
    M = np.zeros((v, v))
    for p in range(v):
        for q in range(p, v):
            for o in range(O):
                if o < H.blocks:  # else the orders share the blocks, and their product
                    G = H.H[H.used[p], o].T @ H.H[H.used[q], o]
                M[p, q] += np.sum((H.scale(p, o) * G * H.scale(q, o).T) ** 2) / k
    return np.triu(M) + np.triu(M, 1).T


#: chance of calling two independent views related (split over the v - 1 views each view is compared with)
UNRELATED_ALPHA = 1e-3


def shared_structure(H: np.ndarray) -> np.ndarray:
    """s_pq = ||U_p^T U_q||_F^2 / (k - 1) for U_p the first-order H_p without its top (trivial, degree)
    eigenvector, H of shape (v, O, n, k): the share of the cluster directions two views have in common (1 for
    the same subspace; (k - 1) / n expected for independent random subspaces)."""
    return alignment_matrix(H[:, :1, :, 1:])


def related_threshold(n: int, k: int, n_views: int) -> float:
    """The share s_pq two independent views exceed with probability UNRELATED_ALPHA / (v - 1): for independent
    subspaces n (k - 1) s_pq is about chi-square with (k - 1)^2 degrees of freedom (mean (k - 1) / n for s_pq)."""
    from scipy.stats import chi2

    return float(chi2.ppf(1 - UNRELATED_ALPHA / max(n_views - 1, 1), max(k - 1, 1) ** 2) / (n * max(k - 1, 1)))


def related_views(H: np.ndarray, drop: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Mask of the views that share more of their cluster directions with at least one other view than two
    independent views would (related_threshold), and each view's largest share. A view unrelated to all others
    (e.g. noise) is what the diversity term -lambda2 mu^T M mu rewards most, so it is left out of the fusion
    (docs/defaults.md); if no view is related to another, or ``drop`` is off, all are kept."""
    v, _, n, k = H.shape
    if not drop:
        return np.ones(v, bool), np.full(v, np.inf)
    S = shared_structure(H)
    np.fill_diagonal(S, -np.inf)
    best = S.max(axis=1) if v > 1 else np.full(v, np.inf)
    keep = best > related_threshold(n, k, v)
    return (keep if keep.any() else np.ones(v, bool)), best


def related_among(H: np.ndarray, usable: np.ndarray, drop: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """related_views among the views ``usable`` (indices) of H: a mask over all views (False for the others) and the
    usable views' largest shares."""
    related, shares = related_views(views_used(H[:, :1], usable), drop=drop)  # first order only: no copy of the others
    mask = np.zeros(len(H), bool)
    mask[usable[related]] = True
    return mask, shares


def views_used(H: np.ndarray, used: np.ndarray) -> np.ndarray:
    """H restricted to the views `used` (indices), without a copy when every view is used."""
    return H if len(used) == len(H) else H[used]


def full_weights(mu: np.ndarray, used: np.ndarray, n_views: int) -> np.ndarray:
    """The weights mu of the views `used` (indices) as one weight per view, 0 for the views left out."""
    full = np.zeros(n_views)
    full[used] = mu
    return full


def warn_unrelated(related: np.ndarray, shares: np.ndarray, n: int, k: int, names: list[str] | None = None,
                   labelled: bool = False) -> None:
    """A warning naming each view related_views left out, with its largest share and the threshold; ``names`` are
    the views' names, or with ``labelled`` their full labels."""
    for p in np.flatnonzero(~np.asarray(related, bool)):
        label = names[p] if labelled else view_label(p, names)
        user_warning(f"{label}: shares no cluster structure with any other view (largest share of its "
                     f"cluster directions {shares[p]:.3g}, chance level {(k - 1) / n:.3g}, threshold "
                     f"{related_threshold(n, k, len(related)):.3g}); it is left out of the fusion and of F's graph "
                     "(weight 0)")


def simplex_qp(M: np.ndarray, f: np.ndarray, tol: float = 1e-12, max_iter: int = 1000) -> np.ndarray:
    """Exact minimiser of mu^T M mu - f^T mu s.t. sum(mu) = 1, mu >= 0 (M PSD), by a primal active-set
    method (Nocedal & Wright, Alg. 16.3) started at the best vertex; the mu step of late_fusion (Eq. 15) and of
    early fusion."""
    v = len(f)
    M = (M + M.T) / 2 + 1e-12 * max(np.trace(M) / v, 1.0) * np.eye(v)
    mu = np.zeros(v)
    mu[np.argmin(np.diag(M) - f)] = 1.0
    working = mu == 0  # active bounds mu_i = 0
    for _ in range(max_iter):
        g = 2 * M @ mu - f
        free = np.flatnonzero(~working)
        nf = len(free)
        K = np.zeros((nf + 1, nf + 1))
        K[:nf, :nf], K[:nf, nf], K[nf, :nf] = 2 * M[np.ix_(free, free)], 1.0, 1.0
        sol = np.linalg.solve(K, np.concatenate([-g[free], [0.0]]))
        step, nu = sol[:nf], sol[nf]
        if np.abs(step).max() <= tol * max(1.0, np.abs(mu).max()):
            lagrange = g + nu  # multipliers of the active bounds
            lagrange[~working] = np.inf
            j = int(np.argmin(lagrange))
            if lagrange[j] >= -tol * max(1.0, np.abs(g).max()):
                break
            working[j] = False
            continue
        p = np.zeros(v)
        p[free] = step
        shrinking = free[step < 0]
        ratios = -mu[shrinking] / p[shrinking]
        alpha = min(1.0, ratios.min()) if len(ratios) else 1.0
        mu = mu + alpha * p
        if alpha < 1.0:
            j = shrinking[np.argmin(ratios)]
            mu[j], working[j] = 0.0, True
    mu = np.maximum(mu, 0.0)
    return mu / mu.sum()


class ScaledViews:
    """The views ``used`` (indices) of H (v, O, n, k), each block H_p^(o) times its column scales (v, O, k; None:
    unscaled): what late_fusion reads of H_p^(o) (Lambda_p^(o))^1/2, the rank-k factors of the used views' G_p^(o)
    (docs/defaults.md), without an n x k copy of any view (H may be a broadcast view, as an anchor graph's orders).
    Its products apply the scales to the k x k factors, and multiply a block that every order shares (a broadcast H)
    once."""

    def __init__(self, H: np.ndarray, scales: np.ndarray | None, used: np.ndarray) -> None:
        self.H, self.scales, self.used = H, scales, np.asarray(used)
        self.shape = (len(self.used), *H.shape[1:])
        self.dtype = H.dtype if scales is None else np.result_type(H, scales)
        self.blocks = 1 if H.shape[1] > 1 and H.strides[1] == 0 else H.shape[1]  # distinct H_p^(o) per view

    def scale(self, p: int, o: int) -> np.ndarray:
        """View p's column scales at order o, as a column (k x 1)."""
        return np.ones((self.shape[3], 1)) if self.scales is None else self.scales[self.used[p], o][:, None]

    def cross(self, X: np.ndarray) -> np.ndarray:
        """H_p^(o)T X of every view and order, (v, O, k, X's columns)."""
        v, O = self.shape[:2]
        out = np.empty((v, O, self.shape[3], X.shape[1]), dtype=np.result_type(self.dtype, X))
        for p in range(v):
            for o in range(O):
                out[p, o] = self.H[self.used[p], o].T @ X if o < self.blocks else out[p, 0]
            if self.scales is not None:
                out[p] *= self.scales[self.used[p], :, :, None]
        return out

    def combine(self, W: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """S = sum_{p,o} mu_p H_p^(o) W_p^(o), one n x k product per stored block, accumulated in place through one
        n x k buffer (views of weight 0 skipped)."""  # S of Eq. 11
        v, O, n, k = self.shape
        S = np.zeros((n, W.shape[-1]), dtype=np.result_type(self.dtype, W))
        term = np.empty_like(S)
        for p in np.flatnonzero(mu):
            factors = [mu[p] * self.scale(p, o) * W[p, o] for o in range(O)]
            if self.blocks == 1:
                factors = [sum(factors)]
            for o, factor in enumerate(factors):
                S += np.matmul(self.H[self.used[p], o], factor.astype(S.dtype, copy=False), out=term)
        return S


def rotations(C: np.ndarray) -> np.ndarray:
    """W_p^(o) = polar(C_p^(o)) of every view and order, C (v, O, k, k)."""  # Eq. 14
    return np.stack([np.stack([polar(block) for block in C_p]) for C_p in C])


def scaled_views(H: np.ndarray | ScaledViews) -> ScaledViews:
    """H (v, O, n, k) as ScaledViews without scales; a ScaledViews as it is."""
    return H if isinstance(H, ScaledViews) else ScaledViews(H, None, np.arange(H.shape[0]))


@dataclass
class LateFusionResult:
    embedding: np.ndarray  # H*, n x k
    target: np.ndarray  # T = S + lambda1 F, whose polar factor is H* (Eq. 12)
    view_weights: np.ndarray  # mu
    rotations: np.ndarray  # W, (v, O, k, k)
    objective: list[float] = field(default_factory=list)  # J after each iteration
    n_iter: int = 0
    converged: bool = False


def default_lambda2(width: int, order: int) -> int:
    """lambda2 = "auto" of Eq. 11: the embedding width times the order O (docs/defaults.md, "The weights lambda1 and
    lambda2")."""
    return width * order


def late_fusion_objective(S, F, Hstar, mu, M, lambda1: float, lambda2: float) -> float:
    """J = tr(H*^T S) + lambda1 tr(H*^T F) - lambda2 mu^T M mu, S = sum mu_p H_p^(o) W_p^(o)."""  # Eq. 11
    def inner(A: np.ndarray, B: np.ndarray) -> float:  # tr(A^T B), summed in float64
        return float(np.vdot(A.astype(np.float64, copy=False), B.astype(np.float64, copy=False)))

    return inner(Hstar, S) + lambda1 * inner(Hstar, F) - float(lambda2 * mu @ M @ mu)


def converged(previous: float, current: float, tol: float) -> bool:
    """The stopping rule of the alternating solvers: relative change of the objective at most ``tol``."""
    return abs(current - previous) <= tol * abs(current)


def fusion_target(S: np.ndarray, F: np.ndarray, lambda1: float) -> np.ndarray:
    """T = S + lambda1 F, built in one n x k buffer."""  # Eq. 12
    T = lambda1 * F
    T += S
    return T


def late_fusion(H: np.ndarray | ScaledViews, F: np.ndarray, lambda1: float, lambda2: float, *, tol: float = 1e-4,
                max_iter: int = 100) -> LateFusionResult:
    """Algorithm 1 on H of shape (v, O, n, k) (or ScaledViews) and the consensus embedding F (n x k).

    W starts as the rotation aligning each H_p^(o) to F (the paper starts at W = I, which makes the first
    H* depend on eigenvector signs), mu uniform; then W (Eq. 14), mu (Eq. 15), H* (Eqs. 12-13) until the
    relative change of J is below ``tol``. Besides H and F it holds S, T and H* of one iteration (each n x k),
    dropping the previous ones before the next are built.
    """
    if lambda2 <= 0:
        raise ValueError(f"lambda2 must be > 0, got {lambda2}")
    H = scaled_views(H)
    v = H.shape[0]
    M = alignment_matrix(H)
    mu = np.full(v, 1.0 / v)
    W = rotations(H.cross(F))
    S = H.combine(W, mu)
    T = fusion_target(S, F, lambda1)
    Hstar = polar(T)  # Eq. 13
    objective, n_iter, done = [], 0, False
    previous = late_fusion_objective(S, F, Hstar, mu, M, lambda1, lambda2)
    for it in range(1, max_iter + 1):
        C = H.cross(Hstar)  # H_p^(o)T H*, k x k
        del S, T, Hstar  # the next iteration's replace them (peak memory)
        W = rotations(C)  # Eq. 14
        a = np.einsum("pokj,pokj->p", W, C)  # tr(H*^T sum_o H_p W_p) = sum_o tr(W_p^T H_p^T H*)
        mu = simplex_qp(M, a / lambda2)  # Eq. 15 with f = a / lambda2 (the paper's lambda1 / lambda2 is a typo)
        S = H.combine(W, mu)
        T = fusion_target(S, F, lambda1)
        Hstar = polar(T)  # Eq. 13, Eq. 12's maximiser
        current = late_fusion_objective(S, F, Hstar, mu, M, lambda1, lambda2)
        objective.append(current)
        n_iter = it
        if converged(previous, current, tol):
            done = True
            break
        previous = current
    return LateFusionResult(Hstar, T, mu, W, objective, n_iter, done)


def fuse_views(H: np.ndarray, eigenvalues: np.ndarray, F: np.ndarray, used: np.ndarray, lambda1: float,
               lambda2: float, *, eigenvalue_scaling: bool = True, tol: float = 1e-4,
               max_iter: int = 100) -> LateFusionResult:
    """late_fusion of the views `used` (indices, related_views), each H_p^(o) scaled by its eigenvalues^1/2 when
    ``eigenvalue_scaling`` (H_p^(o) (Lambda_p^(o))^1/2, applied block by block: ScaledViews); the result's weights
    are those of the views used (full_weights spreads them over all views)."""
    scales = np.sqrt(np.clip(eigenvalues, 0.0, None)) if eigenvalue_scaling else None
    return late_fusion(ScaledViews(H, scales, used), F, lambda1, lambda2, tol=tol, max_iter=max_iter)
