"""Property-based tests (hypothesis): metric invariants, the fusion sub-solvers' optimality conditions,
Algorithm 3's orthogonality, and fuzzed IDX / .mat files (load the same shape or raise ValueError)."""
import numpy as np
import pytest
import scipy.io
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onmsc_dask.fusion import polar, simplex_qp
from onmsc_dask.io import load_mat, read_idx
from onmsc_dask.metrics import evaluate
from onmsc_dask.spectral import orthogonalize

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
seeds = st.integers(0, 2**32 - 1)


pytestmark = pytest.mark.usefixtures("single_threaded_blas")


# ------------------------------------------------------------------ metrics


@SETTINGS
@given(seed=seeds, n=st.integers(1, 60), k_true=st.integers(1, 6), k_pred=st.integers(1, 8))
def test_evaluate_invariant_to_renaming_predicted_labels(seed, n, k_true, k_pred):
    rng = np.random.default_rng(seed)
    y_true, y_pred = rng.integers(0, k_true, n), rng.integers(0, k_pred, n)
    names = rng.permutation(1000)[:k_pred] - 500  # arbitrary (also negative) new names
    base, renamed = evaluate(y_true, y_pred), evaluate(y_true, names[y_pred])
    assert base.keys() == renamed.keys() == {"acc", "nmi", "purity", "ari"}
    for key in base:
        assert renamed[key] == pytest.approx(base[key], abs=1e-12)
    assert 0.0 <= base["acc"] <= base["purity"] + 1e-12 <= 1.0 + 1e-12
    assert -1e-12 <= base["nmi"] <= 1.0 + 1e-12


# ------------------------------------------------------------------ fusion sub-solvers


@SETTINGS
@given(seed=seeds, v=st.integers(1, 7), rank=st.integers(1, 7), scale=st.sampled_from([1e-3, 1.0, 1e3]))
def test_simplex_qp_feasible_and_kkt(seed, v, rank, scale):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((v, min(rank, v)))
    M = scale * B @ B.T  # PSD, possibly singular
    f = scale * rng.standard_normal(v) * rng.choice([0.1, 1.0, 10.0])
    mu = simplex_qp(M, f)
    assert mu.shape == (v,) and np.isfinite(mu).all()
    assert (mu >= 0).all() and mu.sum() == pytest.approx(1.0, abs=1e-12)
    # KKT: g = 2 M mu - f equals -nu on the support and is >= -nu off it (bound multipliers >= 0)
    g = 2 * M @ mu - f
    tol = 1e-7 * max(1.0, np.abs(g).max(), np.abs(f).max())
    support = mu > 1e-10
    nu = -g[support].mean()
    assert np.abs(g[support] + nu).max() <= tol
    assert (g[~support] + nu >= -tol).all()
    # and no vertex or random feasible point is better
    obj = lambda m: m @ M @ m - f @ m  # noqa: E731
    others = np.vstack([np.eye(v), rng.dirichlet(np.ones(v), 50)])
    assert obj(mu) <= min(obj(m) for m in others) + tol


@SETTINGS
@given(seed=seeds, n=st.integers(1, 12), k=st.integers(1, 12))
def test_polar_orthonormal_and_maximal(seed, n, k):
    n, k = max(n, k), min(n, k)  # tall or square, as used (n x k with n >= k)
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((n, k))
    Q = polar(C)
    assert Q.shape == (n, k)
    np.testing.assert_allclose(Q.T @ Q, np.eye(k), atol=1e-10)
    best = np.trace(Q.T @ C)
    assert best == pytest.approx(np.linalg.svd(C, compute_uv=False).sum(), rel=1e-10)  # nuclear norm
    for _ in range(20):
        R, _ = np.linalg.qr(rng.standard_normal((n, k)))
        assert np.trace(R.T @ C) <= best + 1e-10


@SETTINGS
@given(seed=seeds, n=st.integers(3, 40), k=st.integers(1, 6), positive=st.booleans())
def test_orthogonalize_gives_orthonormal_columns(seed, n, k, positive):
    k = min(k, n)
    rng = np.random.default_rng(seed)
    H = rng.standard_normal((n, k)) * rng.uniform(0.1, 10, k)  # non-orthogonal, uneven column scales
    lam = rng.uniform(0.1, 2.0, k) * (1 if positive else rng.choice([-1, 1], k))
    Ht, lam_t = orthogonalize(H, lam)
    np.testing.assert_allclose(Ht.T @ Ht, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(Ht @ np.diag(lam_t) @ Ht.T, H @ np.diag(lam) @ H.T,
                               atol=1e-8 * max(1.0, np.abs(H @ np.diag(lam) @ H.T).max()))
    assert (np.diff(lam_t) <= 1e-12).all()


# ------------------------------------------------------------------ reader fuzzing

IDX_ARRAY = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
IDX_BYTES = bytes([0, 0, 0x08, 3]) + np.array(IDX_ARRAY.shape, ">u4").tobytes() + IDX_ARRAY.tobytes()


def _mat_bytes(tmp_path_factory):
    path = tmp_path_factory.mktemp("mat") / "valid.mat"
    rng = np.random.default_rng(0)
    cell = np.empty((1, 2), dtype=object)
    cell[0, 0], cell[0, 1] = rng.normal(size=(6, 3)), rng.random((6, 2))
    scipy.io.savemat(path, {"X": cell, "y": np.arange(6) % 2})
    return path.read_bytes()


def _mutate(data: bytes, flips: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, byte in flips:
        buf[pos % len(buf)] = byte
    return bytes(buf[:cut] if cut is not None else buf)


mutations = st.tuples(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
                      st.one_of(st.none(), st.integers(0, 10**6)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations)
def test_fuzzed_idx_loads_same_shape_or_value_error(tmp_path, mutation):
    flips, cut = mutation
    data = _mutate(IDX_BYTES, flips, None if cut is None else cut % (len(IDX_BYTES) + 1))
    path = tmp_path / "fuzz-idx3-ubyte"
    path.write_bytes(data)
    try:
        out = read_idx(path)
    except ValueError:
        return
    assert out.shape == IDX_ARRAY.shape and out.dtype == np.uint8


@pytest.fixture(scope="module")
def mat_bytes(tmp_path_factory):
    return _mat_bytes(tmp_path_factory)


# Byte overwrites in the data elements of a .mat can crash scipy.io.loadmat (segfault), which
# would kill the test process, so in-process fuzzing overwrites only the 128-byte header and truncates anywhere.
mat_mutations = st.tuples(st.lists(st.tuples(st.integers(0, 127), st.integers(0, 255)), max_size=4),
                          st.one_of(st.none(), st.integers(0, 10**6)))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mat_mutations)
def test_fuzzed_mat_loads_same_shape_or_value_error(tmp_path, mat_bytes, mutation):
    flips, cut = mutation
    data = _mutate(mat_bytes, flips, None if cut is None else cut % (len(mat_bytes) + 1))
    path = tmp_path / "fuzz.mat"
    path.write_bytes(data)
    try:
        views, y = load_mat(path)
    except ValueError:
        return
    assert [v.shape for v in views] == [(6, 3), (6, 2)] and y.shape == (6,)


CRASH = """
import sys
import numpy as np, scipy.io
from onmsc_dask.io import load_mat
rng = np.random.default_rng(0)
cell = np.empty((1, 2), dtype=object)
cell[0, 0], cell[0, 1] = rng.normal(size=(6, 3)), rng.random((6, 2))
scipy.io.savemat(sys.argv[1], {"X": cell, "y": np.arange(6) % 2})
buf = bytearray(open(sys.argv[1], "rb").read())
buf[393] = 12  # one byte inside the second view's array header
open(sys.argv[1], "wb").write(bytes(buf))
try:
    load_mat(sys.argv[1])
except ValueError:
    pass
"""


def test_mat_with_one_corrupt_byte_does_not_crash(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", CRASH, str(tmp_path / "crash.mat")], capture_output=True,
                          timeout=60)
    assert proc.returncode == 0, f"load_mat crashed the interpreter (exit code {proc.returncode})"
