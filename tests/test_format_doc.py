"""docs/FORMAT.md is the one description of the on-disk formats that source comments cite:
every cited section exists, and no module points at a copy outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("index", "logstore", "compaction", "retention", "spark_tools", "benchmarks")
FORMAT_DOC = ROOT / "docs" / "FORMAT.md"
CITATION = re.compile(r"docs/FORMAT\.md(.*)")
SECTION = re.compile(r'"([A-Za-z.][^"]*)"')
OUTSIDE = "/work/shared"


def source_files() -> list[Path]:
    return [path for package in SOURCE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_no_source_module_names_a_path_under_work_shared() -> None:
    named = [str(path.relative_to(ROOT)) for path in source_files() if OUTSIDE in path.read_text()]
    assert not named, f"modules naming {OUTSIDE} (cite docs/FORMAT.md instead): {named}"


def test_every_cited_format_section_exists() -> None:
    headings = {line.lstrip("#").strip() for line in FORMAT_DOC.read_text().splitlines() if line.startswith("#")}
    missing = [(str(path.relative_to(ROOT)), section) for path in source_files()
               for cited in CITATION.findall(path.read_text()) for section in SECTION.findall(cited)
               if section not in headings]
    assert not missing, f"citations of sections docs/FORMAT.md lacks: {missing}"
