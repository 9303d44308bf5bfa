"""Files stay small (docs/style.md rule 8): a source file past SIZE_LINES_MAX lines must be
listed, with its reason, in docs/style.md "Files past the size rule", and a listed file must
still be past the rule (a list that no longer says what the tree holds misleads)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZE_LINES_MAX = 620
SOURCE_GLOBS = (
    "python/eoslog/**/*.py",
    "spark_udfs/**/*.py",
    "pyext/*.p*",
    "engine/*.[ch]",
    "bench/*.py",
)


def listed_files(style: str) -> set[str]:
    """The paths in the first column of the table under "Files past the size rule"."""
    section = style.split("## Files past the size rule", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.MULTILINE))


def oversized(root: Path) -> set[str]:
    found = set()
    for pattern in SOURCE_GLOBS:
        for path in root.glob(pattern):
            if path.is_file() and len(path.read_text().splitlines()) > SIZE_LINES_MAX:
                found.add(path.relative_to(root).as_posix())
    return found


def test_every_file_past_the_size_rule_is_listed_with_a_reason() -> None:
    listed = listed_files((ROOT / "docs" / "style.md").read_text())
    assert oversized(ROOT) - listed == set(), "split the file, or list it with its reason"


def test_every_listed_file_is_still_past_the_size_rule() -> None:
    listed = listed_files((ROOT / "docs" / "style.md").read_text())
    assert listed, "the list was not found in docs/style.md"
    assert listed - oversized(ROOT) == set(), "remove it from docs/style.md"


def test_the_size_check_finds_a_long_file(tmp_path: Path) -> None:
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "long.c").write_text("x\n" * (SIZE_LINES_MAX + 1))
    (tmp_path / "engine" / "short.c").write_text("x\n" * SIZE_LINES_MAX)
    assert oversized(tmp_path) == {"engine/long.c"}
