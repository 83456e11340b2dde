"""The README runs as written: every `$ command` of its examples, from the repository's root,
prints what the README shows after it; its Python example runs.

The commands run in order, in a scratch copy of the repository's example and test files (one
example may use what an earlier one made, as a reader following the README does), with stdout
and stderr together as a terminal shows them. What varies between runs is normalised in the
README's own form: an ingest's duration (`in 0.33 s`). A line `...` in the README stands for
any number of lines; a command whose shown output has an `error:` line must fail, any other
must succeed (a pipeline may end 141, SIGPIPE's status: a writer whose reader, `head` or
`grep -m1`, stopped early, as asked). The set-up steps a command starts with (making and
activating a virtualenv, `pip install` of this package) are what the test's own environment
already did: they are left out, and the rest of the command runs; that the extras they
install exist is checked against pyproject.toml.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
COPIED = ("examples", "tests/corpus", "tests/data")
"""What the README's commands read: copied, so that the stores they write land in the copy."""

_SECONDS = re.compile(r"\bin \d+\.\d+ s\b")
_SETUP = re.compile(r"python3 -m venv \S+|\. \S+/bin/activate|pip install \S+")
_EXTRAS = re.compile(r"pip install '(?:\.|cputrace)\[([\w,]+)\]'|`cputrace\[([\w,]+)\]`")
SIGPIPE_STATUS = 141
_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Example:
    command: str
    shown: list[str] = field(default_factory=list)
    line: int = 0  # of the command in README.md


def _blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """The fenced blocks of a Markdown text: (language, first line number, lines)."""
    blocks, current, start, language = [], None, 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        fence = _FENCE.match(line)
        if fence and current is None:
            current, start, language = [], number + 1, fence.group(1)
        elif line.startswith("```") and current is not None:
            blocks.append((language, start, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def readme_examples() -> list[Example]:
    examples: list[Example] = []
    for _, start, lines in _blocks(README.read_text()):
        if not any(line.startswith("$ ") for line in lines):
            continue
        for offset, line in enumerate(lines):
            if line.startswith("$ "):
                examples.append(Example(line[2:], line=start + offset))
            elif examples and examples[-1].line >= start:
                examples[-1].shown.append(line)
    return examples


def readme_python() -> list[tuple[int, str]]:
    blocks = _blocks(README.read_text())
    return [(start, "\n".join(lines)) for lang, start, lines in blocks if lang == "python"]


def without_setup(command: str) -> str:
    """The command after the set-up steps it starts with (`A && B && C`: those of A, B, ...)."""
    parts = command.split(" && ")
    while parts and _SETUP.fullmatch(parts[0]):
        parts.pop(0)
    return " && ".join(parts)


def _normalise(lines: list[str]) -> list[str]:
    return [_SECONDS.sub("in N s", line.rstrip()) for line in lines]


def matches(shown: list[str], printed: list[str]) -> bool:
    """`printed` is `shown`, where a shown `...` line stands for any number of printed lines."""
    shown, printed = _normalise(shown), _normalise(printed)
    while shown and not shown[-1]:
        shown.pop()
    while printed and not printed[-1]:
        printed.pop()

    def match(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(printed)
        if shown[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(printed) + 1))
        return j < len(printed) and shown[i] == printed[j] and match(i + 1, j + 1)

    return match(0, 0)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the README's commands read, with `cputrace` of this Python on PATH."""
    root = tmp_path_factory.mktemp("readme")
    for part in COPIED:
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("*.ctrace", "__pycache__"))
    return root


def _environment() -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


EXAMPLES = readme_examples()


def test_the_readme_has_examples() -> None:
    assert len(EXAMPLES) > 30
    assert readme_python()


@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=[f"README:{e.line}" for e in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(scratch: Path, index: int) -> None:
    example = EXAMPLES[index]
    command = without_setup(example.command)
    if not command:
        assert matches(example.shown, []), f"README.md:{example.line}: a set-up step shows output"
        return
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], cwd=scratch, env=_environment(),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
    )  # fmt: skip
    printed = done.stdout.splitlines()
    failing = any(line.startswith("error:") for line in example.shown)
    failed = done.returncode != 0 and not (done.returncode == SIGPIPE_STATUS and "|" in command)
    assert failed == failing, f"exit {done.returncode}:\n{done.stdout}"
    assert matches(example.shown, printed), (
        f"README.md:{example.line}: $ {example.command}\n--- shown\n"
        + "\n".join(example.shown) + "\n--- printed\n" + done.stdout
    )


@pytest.mark.parametrize("start,code", readme_python(), ids=lambda v: str(v) if isinstance(v, int) else "")
def test_readme_python_example_runs(scratch: Path, start: int, code: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=scratch, env=_environment(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, f"README.md:{start}:\n{done.stderr}"


def test_the_readme_installs_extras_that_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    named = {extra for match in _EXTRAS.finditer(README.read_text()) for group in match.groups() if group
             for extra in group.split(",")}  # fmt: skip
    assert {"test", "pandas", "plot"} <= named <= set(project["optional-dependencies"])
    assert "cputrace" in project["scripts"]
    assert any(without_setup(e.command).startswith("cputrace ") and e.command.startswith("pip install .")
               for e in EXAMPLES)  # fmt: skip


def test_setup_steps_are_left_out_and_the_rest_runs() -> None:
    assert without_setup("python3 -m venv .venv && . .venv/bin/activate") == ""
    assert without_setup("pip install . && cputrace info x") == "cputrace info x"
    assert without_setup("cputrace info x && pip install .") == "cputrace info x && pip install ."
    assert without_setup("pip install . ; rm -rf /") == "pip install . ; rm -rf /"


def test_matching_treats_dots_as_any_lines() -> None:
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert not matches(["a", "...", "d"], ["a", "b"])
    assert matches(["x: 3 rows in 0.33 s"], ["x: 3 rows in 1.20 s"])
    assert not matches(["a", "b"], ["a", "c"])
