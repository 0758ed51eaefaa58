"""No absolute path of a development machine in the repository's text: the README, docs, tests, package,
pipelines and benchmarks must work from any clone."""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("README.md", "docs", "tests", "onmsc_dask", "pipelines", "bench", "cluster_configs", ".ci")
MACHINE_PATH = re.compile("/" + "(?:work|root|home)/")  # split so this file does not match itself


def tracked_text_files() -> list[Path]:
    try:
        listed = subprocess.run(["git", "ls-files", "--", *CHECKED], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # not a git clone (an sdist): every file under the paths
        listed = [str(p.relative_to(ROOT)) for c in CHECKED for p in (ROOT / c).rglob("*") if p.is_file()]
    return [ROOT / name for name in listed if (ROOT / name).suffix not in (".png", ".npy", ".zarr")]


def test_no_machine_paths():
    files = tracked_text_files()
    assert any(f.name == "README.md" for f in files) and any(f.suffix == ".py" for f in files)
    found = [f"{f.relative_to(ROOT)}:{i}: {line.strip()[:120]}"
             for f in files for i, line in enumerate(f.read_text(errors="replace").splitlines(), 1)
             if MACHINE_PATH.search(line)]
    assert not found, "absolute development-machine paths:\n" + "\n".join(found)


@pytest.mark.parametrize("top", ["work", "root", "home"])
def test_the_pattern_finds_machine_paths(top):
    assert MACHINE_PATH.search(f"see /{top}/shared/paper") and not MACHINE_PATH.search(f"see ../{top}s")
