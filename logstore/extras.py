"""The optional parts of logstore (pyproject's extras): `pip install logstore` is the engine
alone; Spark audits, the Kafka server and audit plots import their libraries through
`require`, so a missing extra is one error naming the command that installs it."""

from __future__ import annotations

import importlib

from logstore.errors import MissingExtraError

# extra -> what needs it (pyproject.toml's [project.optional-dependencies] lists the packages)
EXTRAS = {
    "spark": "a Spark audit",
    "server": "the Kafka server",
    "plot": "an audit plot",
}


def require(extra: str, *modules: str) -> None:
    """Import `modules`, which `extra` installs; MissingExtraError naming
    `pip install 'logstore[<extra>]'` when one is not installed (a module that is installed
    but fails to import raises its own error)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name is None or module.split(".")[0] != exc.name.split(".")[0]:
                raise
            raise MissingExtraError(
                f"{EXTRAS[extra]} needs {module}, which is not installed: "
                f"pip install 'logstore[{extra}]'") from None
