"""The one way tests reach ``../shared/data``, benchmark data kept beside the repository (not in it): a missing
directory skips the test with a reason that says so."""
from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_path(name: str) -> Path:
    """``../shared/data/<name>``, or skip the calling test when it is not there."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"../shared/data/{name} not found (benchmark data beside the repository)")
    return path


def shared_mats() -> list[Path]:
    """The ``.mat`` benchmark files of ``../shared/data`` (none without it)."""
    return sorted(SHARED_DATA.glob("*.mat"))
