"""The layers, one way only: spark_tools --> compaction, retention --> logstore --> index.

Every import of every module of the five packages is read from its source (ast), at module
level and inside functions alike. No module may import a layer above its own, and logstore's
modules may not import each other in a cycle. logstore.cli and logstore.demo are the
application layer: they wire the policies (compaction, retention) and spark_tools into the
engine, so they may import them, and they are left out of the cycle check; so is
logstore.__main__, which runs the CLI. logstore.tools (dump's Kafka text, the record
decoders) serves them and sits in that layer too. The engine imports none of that layer.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("index", "logstore", "compaction", "retention", "spark_tools")
#: The packages each package may not import (the layers above it).
ABOVE = {
    "index": ("logstore", "compaction", "retention", "spark_tools"),
    "logstore": ("compaction", "retention", "spark_tools"),
    "compaction": ("spark_tools",),
    "retention": ("spark_tools",),
    "spark_tools": (),
}
APPLICATION = ("logstore.cli", "logstore.demo", "logstore.tools", "logstore.__main__")


class Import(NamedTuple):
    """`importer` imports `imported` (a module of the five packages) at `line`."""

    importer: str
    imported: str
    line: int

    def __str__(self) -> str:
        return f"{self.importer} imports {self.imported} (line {self.line})"


def module_names() -> dict[str, Path]:
    """{dotted module name: source file} of every module of the five packages."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_in(source: str, importer: str, is_package: bool, known: set[str]) -> list[Import]:
    """The imports of `known` modules in `source`, wherever they stand (functions included).

    `from a import b` counts as importing a.b when that is a module, else as importing a.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = importer.split(".")[: len(importer.split(".")) - node.level + is_package]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found += [Import(importer, target, node.lineno) for target in dict.fromkeys(targets)
                  if target.split(".")[0] in PACKAGES]
    return found


def all_imports() -> list[Import]:
    modules = module_names()
    known = set(modules)
    return [imp for name, path in modules.items()
            for imp in imports_in(path.read_text(), name, path.name == "__init__.py", known)]


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def is_application(module: str) -> bool:
    return any(in_package(module, app) for app in APPLICATION)


def upward_imports(imports: list[Import]) -> list[Import]:
    """The imports that point to a layer above the importer's (the application layer aside)."""
    return [imp for imp in imports if not is_application(imp.importer)
            and imp.imported.split(".")[0] in ABOVE[imp.importer.split(".")[0]]]


def cycles(imports: list[Import]) -> list[list[Import]]:
    """The import cycles among logstore's engine modules: for each strongly connected group of
    modules, the imports inside it (Tarjan's algorithm)."""
    def engine(module: str) -> bool:
        return in_package(module, "logstore") and not is_application(module)

    edges = [imp for imp in imports if engine(imp.importer) and engine(imp.imported)
             and imp.importer != imp.imported]
    graph: dict[str, list[str]] = {}
    for imp in edges:
        graph.setdefault(imp.importer, []).append(imp.imported)
        graph.setdefault(imp.imported, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(([imp for imp in edges if imp.importer in g and imp.imported in g] for g in groups),
                  key=lambda group: group[0])


def test_no_module_imports_a_layer_above_its_own():
    upward = upward_imports(all_imports())
    assert not upward, "imports against the layering (spark_tools --> compaction, retention --> " \
        "logstore --> index; only the application layer may import the policies):\n" + \
        "\n".join(f"  {imp}" for imp in upward)


def test_the_engine_imports_nothing_of_the_application_layer():
    found = [imp for imp in all_imports() if not is_application(imp.importer) and is_application(imp.imported)]
    assert not found, "engine modules importing the application layer:\n" + "\n".join(f"  {imp}" for imp in found)


def test_logstores_modules_import_each_other_without_cycles():
    found = cycles(all_imports())
    assert not found, "import cycles among logstore's modules:\n" + "\n".join(
        "  cycle of " + ", ".join(sorted({imp.importer for imp in group})) + ":\n"
        + "\n".join(f"    {imp}" for imp in group) for group in found)


def test_the_scan_sees_imports_in_functions_relative_ones_and_submodules():
    source = (
        "import numpy\n"
        "from index import errors\n"
        "from . import segment\n"
        "def late():\n"
        "    from retention.apply import apply_retention\n"
    )
    known = {"index", "index.errors", "logstore", "logstore.log", "logstore.segment", "retention.apply"}
    found = imports_in(source, "logstore.log", False, known)
    assert [(imp.imported, imp.line) for imp in found] == [
        ("index.errors", 2), ("logstore.segment", 3), ("retention.apply", 5)]
    assert upward_imports(found) == [Import("logstore.log", "retention.apply", 5)]


def test_cycles_are_reported_with_the_imports_that_close_them():
    imports = [Import("logstore.a", "logstore.b", 1), Import("logstore.b", "logstore.a", 7),
               Import("logstore.b", "logstore.c", 2), Import("logstore.cli.x", "logstore.a", 3),
               Import("logstore.a", "logstore.cli.x", 4)]
    assert cycles(imports) == [[Import("logstore.a", "logstore.b", 1), Import("logstore.b", "logstore.a", 7)]]


#: Size guards from the architecture issues: Log keeps its part of Kafka's UnifiedLog only (the
#: segment list is LocalLog's), and no module grows past what a reader takes in at once.
MODULE_MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    long = {name: n for name, path in module_names().items()
            if (n := len(path.read_text().splitlines())) > MODULE_MAX_LINES}
    assert not long, f"modules over {MODULE_MAX_LINES} lines: {long}"


def test_internal_topic_records_have_one_home() -> None:
    """Generated messages (logstore/server/messages) are API requests and responses only: the
    records of __consumer_offsets, __transaction_state and __cluster_metadata are declared once,
    in logstore.internal_topics (coordinator_schemas, metadata_schemas), which the coordinators
    write with and dump's decoders read with; add new record types to those tables."""
    definitions = ROOT / "logstore" / "server" / "messages" / "resources"
    kinds = {path.name: json.loads(re.sub(r"(?m)^\s*//.*$", "", path.read_text()))["type"]
             for path in definitions.glob("*.json")}
    records = {name: kind for name, kind in kinds.items() if kind not in ("request", "response")}
    assert not records, f"declare these in logstore.internal_topics, not as generated messages: {records}"
