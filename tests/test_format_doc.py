"""docs/FORMAT.md is the one description of the on-disk formats that source comments cite:
every cited section exists (that no module points at a copy outside the repository is
test_repository_data's broader check)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO_ROOT

ROOT = REPO_ROOT
SOURCE_PACKAGES = ("index", "logstore", "compaction", "retention", "spark_tools", "benchmarks")
FORMAT_DOC = ROOT / "docs" / "FORMAT.md"
CITATION = re.compile(r"docs/FORMAT\.md(.*)")
SECTION = re.compile(r'"([A-Za-z.][^"]*)"')


def source_files() -> list[Path]:
    return [path for package in SOURCE_PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def test_every_cited_format_section_exists() -> None:
    headings = {line.lstrip("#").strip() for line in FORMAT_DOC.read_text().splitlines() if line.startswith("#")}
    missing = [(str(path.relative_to(ROOT)), section) for path in source_files()
               for cited in CITATION.findall(path.read_text()) for section in SECTION.findall(cited)
               if section not in headings]
    assert not missing, f"citations of sections docs/FORMAT.md lacks: {missing}"


def test_the_documented_v2_header_is_the_declared_one() -> None:
    from logstore.records.header import V2_HEADER_DTYPE

    text = FORMAT_DOC.read_text()
    table = text[text.index("## Record batch, magic 2"):text.index("## Record\n")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")][:2]
            for line in table.splitlines() if re.match(r"\| \d+ \| \d+ \|", line)]
    declared = [[str(V2_HEADER_DTYPE.fields[name][1]), str(V2_HEADER_DTYPE[name].itemsize)]
                for name in V2_HEADER_DTYPE.names]
    assert rows == declared
