"""Generated tables in bench/RESULTS.md: each benchmark rewrites only its own block, between its markers, so the
hand-written commentary around the block stays."""
from __future__ import annotations

import os
from pathlib import Path

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"


def markers(key: str) -> tuple[str, str]:
    """The lines that open and close the block ``key`` (e.g. "quality")."""
    return f"<!-- begin {key}: generated, do not edit by hand -->", f"<!-- end {key} -->"


def write_block(path: Path, key: str, text: str, heading: str) -> None:
    """Put ``text`` between the markers of ``key`` in the markdown file ``path``, replacing what was there; if the
    file or the markers are missing, append a section ``heading`` holding the block."""
    begin, end = markers(key)
    block = f"{begin}\n{text.strip()}\n{end}"
    old = path.read_text() if path.exists() else ""
    i, j = old.find(begin), old.find(end)
    if i >= 0 and j > i:
        new = old[:i] + block + old[j + len(end):]
    elif i >= 0 or j >= 0:
        raise ValueError(f"{path}: only one of the markers of the '{key}' block is there; restore '{begin}' and "
                         f"'{end}' or remove both")
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + f"## {heading}\n\n{block}\n"
    path.write_text(new)


def relative_link(target: Path, markdown_file: Path) -> str:
    """``target`` as a link from ``markdown_file``'s directory (POSIX separators)."""
    return Path(os.path.relpath(target.resolve(), markdown_file.resolve().parent)).as_posix()
