"""Registries of named code loaded on first use: the input formats and the exporters.

An entry names its code as `"package.module:attribute"`, as Python's entry points do; `load`
imports the module only then, so listing a registry (for --help, for sniffing) imports none
of the decoders or writers, nor what they need.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass(frozen=True, slots=True)
class Plugin:
    """A name users give (`--format NAME`, `--to NAME`), one line about it, and its code."""

    name: str
    description: str
    code: str  # "package.module:attribute"

    def load(self) -> Any:
        """The attribute `code` names, its module imported on first use."""
        module, attribute = self.code.split(":")
        return getattr(importlib.import_module(module), attribute)


P = TypeVar("P", bound=Plugin)


def registry(*plugins: P) -> dict[str, P]:
    """The plugins by name, in the order given."""
    return {plugin.name: plugin for plugin in plugins}
