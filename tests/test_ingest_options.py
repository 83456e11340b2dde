"""Decoder options are typed: each format declares the ones it takes, `--option` (and the
library's `options=`) is checked against them before anything is decoded, `cputrace formats`
lists them, and program images travel as `--image` / `images=`, never as an option."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

import cputrace
from cputrace.cli import cli
from cputrace.errors import UsageError
from cputrace.formats import FORMATS
from cputrace.ingest import ingest

ROOT = Path(__file__).resolve().parent.parent
QUICKSORT = ROOT / "examples" / "quicksort.tarmac"
ARMULATOR = ROOT / "examples" / "armulator.trc"
BROKEN = ROOT / "examples" / "broken.tarmac"
XSCALE = ROOT / "tests" / "data" / "xscale" / "calls-armv5te-wrap.txt"
XSCALE_ELF = ROOT / "tests" / "corpus" / "calls-armv5te.elf"
TARMAC_OPTIONS = ["default_isa", "byte_order", "vector_base", "high_vectors", "vbar"]
"""Tarmac's options as README.md and docs/formats.md describe them."""


def run(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def tables(store: Path) -> dict[str, pa.Table]:
    trace = cputrace.Trace(store)
    return {name: trace.sql(f"SELECT * EXCLUDE (src) FROM {name} ORDER BY seq") for name in
            ("instructions", "registers", "memory", "events")}  # fmt: skip


# -- unknown keys and bad values: bad usage before decoding ----------------------------------


def test_an_unknown_option_is_bad_usage_naming_the_options_the_format_takes(tmp_path: Path) -> None:
    code, output = run("ingest", QUICKSORT, "--option", "byte_ordre=big", "-o", tmp_path / "s")
    assert code == 2
    assert "unknown option 'byte_ordre'" in output
    listed = re.search(r"format tarmac takes options (\w+(?:, \w+)*)", output)
    assert listed and listed.group(1).split(", ") == TARMAC_OPTIONS, output
    assert not (tmp_path / "s").exists()


def test_a_format_without_options_says_so(tmp_path: Path) -> None:
    code, output = run("ingest", ARMULATOR, "--option", "default_isa=A32", "-o", tmp_path / "s")
    assert code == 2 and "format armulator takes no options" in output


def test_options_are_checked_before_decoding(tmp_path: Path) -> None:
    """A bad option on an input that --strict would also refuse: the usage error (exit 2) comes
    first, not the input's (exit 1)."""
    code, _ = run("ingest", BROKEN, "--strict", "-o", tmp_path / "a")
    assert code == 1
    code, output = run("ingest", BROKEN, "--strict", "--option", "high_vectors=perhaps", "-o", tmp_path / "b")
    assert code == 2 and "option high_vectors: expected true or false" in output


def test_an_option_the_decoder_reads_only_sometimes_is_checked_always(tmp_path: Path) -> None:
    """`vbar` is read only when a flow-only trace is walked through an image; a bad one was
    ignored on any other Tarmac trace. It is bad usage on every one."""
    code, output = run("ingest", QUICKSORT, "--option", "vbar=0x1ffffffffffffffff", "-o", tmp_path / "s")
    assert code == 2
    assert "option vbar: expected a number from 0 to 0xffffffffffffffff, got '0x1ffffffffffffffff'" in output
    assert not (tmp_path / "s").exists()


def test_inputs_of_several_formats_take_the_options_of_any_of_them(tmp_path: Path) -> None:
    store = tmp_path / "both.ctrace"
    code, output = run("ingest", ARMULATOR, QUICKSORT, "--option", "byte_order=little", "-o", store)
    assert code == 0, output
    code, output = run("ingest", ARMULATOR, QUICKSORT, "--option", "etmcr=0", "-o", tmp_path / "no")
    assert code == 2 and "formats armulator, tarmac take options" in output


def test_the_library_checks_a_plain_dict_the_same_way(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^unknown option 'bogus': format tarmac takes options default_isa"):
        ingest([QUICKSORT], tmp_path / "a", options={"bogus": 1})
    with pytest.raises(UsageError, match=r"^option byte_order: expected one of little, big, got 'middle'$"):
        ingest([QUICKSORT], tmp_path / "b", options={"byte_order": "middle"})
    with pytest.raises(UsageError, match=r"^unknown option 'etmcr': format tarmac takes options "):
        ingest([QUICKSORT], tmp_path / "c", options={"etmcr": 0x1000})  # a coresight option
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["", "x" * 5000, "a\0b", "tests"])  # none, too long, NUL, a folder
def test_a_file_option_naming_no_file_is_bad_usage(tmp_path: Path, name: str) -> None:
    """Not an OSError (a name too long for the file system) or a ValueError (a NUL byte)."""
    with pytest.raises(UsageError, match=r"^option etm_config: expected an ETM configuration file"):
        ingest([ROOT / "tests" / "data" / "etmv3" / "tc2" / "cstrace.bin"], tmp_path / "s",
               format="coresight", options={"etm_config": name})  # fmt: skip


def test_option_values_keep_what_was_given_in_the_manifest(tmp_path: Path) -> None:
    """Values are checked and read by type, and recorded as given."""
    given = {"byte_order": "LITTLE", "high_vectors": "no"}
    result = ingest([QUICKSORT], tmp_path / "s", options=given)
    assert result.manifest["options"] == {"strict": False, **given}


# -- the declared defaults are the decoders' defaults ----------------------------------------


def test_giving_an_option_its_listed_default_changes_nothing(tmp_path: Path) -> None:
    """Each Tarmac option `cputrace formats` shows a default for, given that default (as text,
    as the command line gives it), decodes what leaving it out decodes."""
    plain = tables(ingest([QUICKSORT], tmp_path / "plain").store)
    defaults = {o.name: o.default for o in FORMATS["tarmac"].options if o.default is not None}
    assert defaults == {"default_isa": "T32", "byte_order": "little", "high_vectors": False}
    given = {name: str(value).lower() for name, value in defaults.items()}
    assert tables(ingest([QUICKSORT], tmp_path / "given", options=given).store) == plain


# -- program images: --image and images=, never an option ------------------------------------


def test_images_given_as_an_option_are_refused_pointing_at_image(tmp_path: Path) -> None:
    """It was read as a list of paths: `images=x.elf` loaded "x", ".", "e", ... and failed on
    "/" ("/: cannot read")."""
    code, output = run("ingest", XSCALE, "--option", f"images={XSCALE_ELF}", "-o", tmp_path / "s")
    assert code == 2 and "unknown option 'images'" in output and "--image PATH" in output
    assert "cannot read" not in output
    with pytest.raises(UsageError, match=r"unknown option 'images'.*images=\[PATH\]"):
        ingest([XSCALE], tmp_path / "t", options={"images": [str(XSCALE_ELF)]})


def test_images_reach_the_decoder_whether_one_path_or_a_list(tmp_path: Path) -> None:
    """`images=` takes a list of `PATH[@ADDR]`, or one (a str or a Path), never iterated as
    characters; the manifest records them as given to `--image`."""
    listed = ingest([XSCALE], tmp_path / "listed", images=[XSCALE_ELF])
    one = ingest([XSCALE], tmp_path / "one", images=str(XSCALE_ELF))
    code, output = run("ingest", XSCALE, "--image", XSCALE_ELF, "-o", tmp_path / "cli")
    assert code == 0, output
    assert listed.manifest["counts"]["instructions"] > 1000
    assert tables(one.store) == tables(listed.store) == tables(tmp_path / "cli")
    for result in (listed, one):
        assert result.manifest["options"] == {"strict": False, "images": [str(XSCALE_ELF)]}


# -- cputrace formats ------------------------------------------------------------------------


def _listing() -> dict[str, list[str]]:
    """`cputrace formats` by format: the lines under each format's line."""
    code, output = run("formats")
    assert code == 0
    listed: dict[str, list[str]] = {}
    for line in output.splitlines():
        if not line.startswith(" "):
            name = line.split(" ", 1)[0]
            listed[name] = [line]
        else:
            listed[name].append(line.strip())
    return listed


def test_formats_lists_every_format_with_its_declared_options() -> None:
    listed = _listing()
    assert list(listed) == list(FORMATS)
    for name, entry in FORMATS.items():
        head, *lines = listed[name]
        aliases = "".join(f", alias {alias}" for alias in entry.aliases)
        assert head.startswith(f"{name} ({'sniffed' if entry.sniff else f'--format {name}'}{aliases}): ")
        assert entry.description in head
        if not entry.options:
            assert lines == ["(no options)"]
            continue
        assert [line.split()[0] for line in lines[::2]] == [o.name for o in entry.options]
        for option, values, help_line in zip(entry.options, lines[::2], lines[1::2], strict=True):
            assert option.values in values and help_line == option.help
            default = re.search(r"\(default (\S+)\)$", values)
            assert (default.group(1) if default else None) == (
                None if option.default is None else str(option.default).lower()
                if isinstance(option.default, bool) else str(option.default)
            )


def test_every_option_the_docs_name_is_listed() -> None:
    """The options README.md and docs/formats.md tell users to give (`--option NAME=...`) are
    options `cputrace formats` lists."""
    listed = {line.split()[0] for name, lines in _listing().items() if FORMATS[name].options
              for line in lines[1::2]}  # fmt: skip
    docs = (ROOT / "README.md").read_text() + (ROOT / "docs" / "formats.md").read_text()
    named = set(re.findall(r"--option\s+([a-z]\w*)=", docs))
    assert {"byte_order", "vbar", "high_vectors", "xscale_pc", "xscale_input", "itbc0", "cpu"} <= named
    assert named <= listed, named - listed


# -- the flags that stand for options ---------------------------------------------------------


def test_a_flag_and_the_option_it_stands_for_decode_alike(tmp_path: Path) -> None:
    """`--default-isa A64` is `--option default_isa=a64` (any case)."""
    line = "1 clk cpu0 IT (1) 00008000 d503201f svc_s : NOP\n"  # no ISA letter: the default ISA
    trace = tmp_path / "t.tarmac"
    trace.write_text(line)
    code, output = run("ingest", trace, "--default-isa", "A64", "-o", tmp_path / "flag")
    assert code == 0, output
    code, output = run("ingest", trace, "--option", "default_isa=a64", "-o", tmp_path / "option")
    assert code == 0, output
    assert tables(tmp_path / "flag")["instructions"].column("isa").to_pylist() == ["A64"]
    assert tables(tmp_path / "flag") == tables(tmp_path / "option")
