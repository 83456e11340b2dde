"""What an outside check of every command found: inputs and option values that ended in an internal
error (exit 70) instead of an answer or a clear message. Each test is the command as the user
typed it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli, exits

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


# -- sql ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "/* nothing */"])
def test_sql_without_a_statement_is_bad_usage(quicksort_copy, query):
    result = _run("sql", str(quicksort_copy), query)
    assert result.exit_code == exits.USAGE, result.output
    assert "no SQL statement" in result.output and "internal error" not in result.output
