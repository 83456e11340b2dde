"""Every command's --help ends with examples, and every example runs as written from the
repository root (here: in a copy of the files they use)."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cputrace.cli import cli, exits
from cputrace.cli.examples import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent


def _help(path: str) -> str:
    result = CliRunner().invoke(cli, [*path.split(), "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def _command_paths() -> list[str]:
    """Every command and subcommand, by the words that name it ("" for cputrace itself)."""
    paths = [""]
    context = cli.make_context("cputrace", ["--help"], resilient_parsing=True)
    for name in cli.list_commands(context):
        paths.append(name)
        command = cli.get_command(context, name)
        for sub in getattr(command, "commands", {}):
            paths.append(f"{name} {sub}")
    return paths


def _examples(help_text: str) -> list[str]:
    """The command lines after `Examples:` (each `$ cputrace ...`)."""
    lines = [line.strip() for line in help_text.splitlines()]
    if "Examples:" not in lines:
        return []
    tail = lines[lines.index("Examples:") + 1 :]
    return [line.removeprefix("$ ") for line in tail if line]


@pytest.mark.parametrize("path", _command_paths())
def test_help_ends_with_examples(path):
    text = _help(path)
    examples = _examples(text)
    assert 1 <= len(examples) <= 2, text
    assert all(line.startswith("cputrace ") for line in examples), examples
    last = text.rstrip().splitlines()[-1].strip()
    assert last == f"$ {examples[-1]}"
    assert examples == list(EXAMPLES[path])


def test_summaries_are_not_cut_inside_an_abbreviation():
    """click ends a command's summary at its first sentence: "e.g." must not end it."""
    text = _help("")
    summaries = text.partition("Commands:\n")[2].partition("\n\n")[0]
    diff = next(line for line in summaries.splitlines() if line.split()[0] == "diff")
    assert "Compare two traces of the same program core by core" in diff
    assert "(e.g." not in summaries


def test_plot_names_the_extra_it_needs(monkeypatch, tmp_path):
    assert "pip install 'cputrace[plot]'" in " ".join(_help("profile").split())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "matplotlib.backend_bases", None)
    trace = tmp_path / "q.tarmac"
    shutil.copy(ROOT / "examples" / "quicksort.tarmac", trace)
    result = CliRunner().invoke(cli, ["profile", str(trace), "--plot", str(tmp_path / "p.png")])
    assert result.exit_code == exits.USAGE
    assert "needs matplotlib, the plot extra: pip install 'cputrace[plot]'" in result.output
    assert not list(tmp_path.glob("*.ctrace")), "the option is checked before any work"


def test_plot_format_is_checked_first(tmp_path):
    pytest.importorskip("matplotlib")
    trace = tmp_path / "q.tarmac"
    shutil.copy(ROOT / "examples" / "quicksort.tarmac", trace)
    result = CliRunner().invoke(cli, ["profile", str(trace), "--plot", str(tmp_path / "p.nope")])
    assert result.exit_code == exits.USAGE and "not nope" in result.output


@pytest.fixture(scope="module")
def repository_copy(tmp_path_factory) -> Path:
    """The folders the examples read, copied, so that what they write stays out of the repository."""
    root = tmp_path_factory.mktemp("repository")
    for folder in ("examples", "tests/corpus", "tests/data"):
        shutil.copytree(ROOT / folder, root / folder)
    return root


@pytest.mark.parametrize("path", _command_paths())
def test_help_examples_run(path, repository_copy, monkeypatch):
    monkeypatch.chdir(repository_copy)
    examples = _examples(_help(path))
    assert examples
    for line in examples:
        words = shlex.split(line)
        assert words[0] == "cputrace"
        result = CliRunner().invoke(cli, words[1:])
        assert result.exit_code == 0, f"{line}\n{result.output}"
        assert result.stdout or result.stderr
