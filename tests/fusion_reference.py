"""Dense reference forms of late fusion's quantities, for the tests to check the package's block-wise ones against."""
import numpy as np

from onmsc_dask.fusion import late_fusion_objective, scaled_views


def eigenvalue_scaled(H: np.ndarray, eigenvalues: np.ndarray) -> np.ndarray:
    """H_p^(o) (Lambda_p^(o))^1/2 for H (v, O, n, k) and eigenvalues (v, O, k), formed whole."""
    return H * np.sqrt(np.clip(eigenvalues, 0.0, None))[:, :, None, :]


def combine(H: np.ndarray, W: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """S = sum_{p,o} mu_p H_p^(o) W_p^(o)."""
    return scaled_views(H).combine(W, mu)


def objective(H, F, Hstar, W, mu, M, lambda1: float, lambda2: float) -> float:
    """J of Eq. 11 from the views' H and rotations W."""
    return late_fusion_objective(combine(H, W, mu), F, Hstar, mu, M, lambda1, lambda2)
