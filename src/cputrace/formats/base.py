"""What every input decoder provides, and the context it decodes in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import pyarrow as pa

from ..errors import CputraceError, TraceFormatError, UsageError
from ..inputs import InputFile

if TYPE_CHECKING:
    from ..image import Image

Batch = dict[str, pa.Table]
"""Rows for some of the model's tables, in input order; `seq` counts from 0 per input."""

MAX_WARNINGS_KEPT = 50
HIGH_VECTOR_BASE = 0xFFFF0000
"""Where ARM exception vectors are with SCTLR.V set."""


@dataclass
class DecodeContext:
    """What one ingest decodes with (the program image, the decoder options as checked against
    the formats' `Option`s), and its warning tally."""

    strict: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    image: Image | None = None
    warnings: int = 0
    warning_samples: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)

    def option(self, option: Option) -> Any:
        """The value of a decoder option: as given, else its default."""
        return option.read(self.options)

    def warn(self, path: str, where: str, message: str) -> None:
        self.warnings += 1
        if len(self.warning_samples) < MAX_WARNINGS_KEPT:
            self.warning_samples.append(f"{path}:{where}: {message}")

    def doubt(self, path: str, where: str, message: str) -> None:
        """A result that is likely wrong though every record was read (the image of another
        program): an error in strict mode, a counted warning otherwise."""
        if self.strict:
            raise CputraceError(f"{path}:{where}: {message}")
        self.warn(path, where, message)

    def reject(self, path: str, where: str, expected: str, got: str) -> None:
        """An unparsable record: an error in strict mode, a counted warning otherwise."""
        if self.strict:
            raise TraceFormatError(path, where, expected, got)
        self.warn(path, where, f"kept as text: expected {expected}")

    def leave_out(self, path: str, where: str, expected: str, got: str, consequence: str) -> None:
        """Input that cannot be decoded and is left out, not kept as text (a bad packet, a cut
        frame, a corrupt buffer line): an error in strict mode, otherwise a counted warning
        saying what was expected, what came and what became of it (`consequence`)."""
        if self.strict:
            raise TraceFormatError(path, where, expected, got)
        self.warn(path, where, f"expected {expected}, got {got}: {consequence}")


class Decoder(Protocol):
    name: ClassVar[str]

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        """The input's records as batches of model rows."""
        ...


OptionKind = Literal["number", "flag", "choice", "file"]
_FLAG_WORDS = {True: ("1", "true", "yes", "on"), False: ("0", "false", "no", "off")}
_FLAG_VALUES = {word: flag for flag, words in _FLAG_WORDS.items() for word in words}


@dataclass(frozen=True, slots=True)
class Option:
    """A decoder option (`--option NAME=VALUE`; `options={NAME: VALUE}` in Python): what it
    takes, its default and one line of help. Each format lists its own in `Format.options`;
    ingest checks the options given against them before decoding, and a decoder reads each
    with `read`.

    A number is an int, or text in any base Python reads (0x...), within `allowed` when that
    is given (`expected` then says how messages name it, else "a number from 0 to MAX"); a
    flag is a bool, or true/false, yes/no, on/off, 1/0; a choice one of `choices`, in any
    case; a file the path of an existing file."""

    name: str
    kind: OptionKind
    help: str
    default: Any = None
    choices: tuple[str, ...] = ()
    allowed: range | None = None
    expected: str = ""

    @property
    def values(self) -> str:
        """What the option takes, as messages and listings say it."""
        if self.expected:
            return self.expected
        if self.kind == "flag":
            return "true or false (yes/no, on/off, 1/0)"
        if self.kind == "choice":
            return f"one of {', '.join(self.choices)}"
        if self.kind == "number" and self.allowed is not None:
            return f"a number from {self.allowed.start} to {self.allowed[-1]:#x}"
        return "a number" if self.kind == "number" else "a file"

    def read(self, options: Mapping[str, Any]) -> Any:
        """This option's value in `options` (given, or checked already), else its default."""
        value = options.get(self.name)
        return self.default if value is None else self.parse(value)

    def parse(self, value: Any) -> Any:
        """`value` as this option takes it: an int, a bool, the choice as `choices` spell it,
        or a Path; a value it cannot take is bad usage naming the option (UsageError)."""
        if self.kind == "number":
            return self._number(value)
        if self.kind == "flag":
            flag = value if isinstance(value, bool) else _FLAG_VALUES.get(str(value).strip().lower())
            if flag is None:
                raise self.error(value, self.values)
            return flag
        if self.kind == "choice":
            wanted = str(value).strip().lower()
            for choice in self.choices:
                if choice.lower() == wanted:
                    return choice
            raise self.error(value, self.values)
        path = Path(str(value))
        try:
            is_file = path.is_file()
        except (OSError, ValueError):  # a name no file can have: too long, a NUL byte
            is_file = False
        if not str(value) or not is_file:
            raise self.error(value, self.values)
        return path

    def error(self, value: Any, expected: str) -> UsageError:
        """Bad usage (exit 2 on the command line), naming the option, the value given and what
        is allowed."""
        return UsageError(f"option {self.name}: expected {expected}, got {value!r}")

    def _number(self, value: Any) -> int:
        number = parse_int(value)
        if number is None:  # text that is no number: "a number", unless the range says more
            raise self.error(value, "a number" if self.expected or self.allowed is None else self.values)
        if self.allowed is not None and number not in self.allowed:
            raise self.error(value, self.values)
        return number


def parse_int(value: Any) -> int | None:
    """An int, or text of an integer in any base Python reads (0x...); None for anything else
    (a bool, text of no number or of one over 4,300 digits long)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return int(str(value).strip(), 0)
    except ValueError:
        return None


def bits(width: int) -> range:
    """The unsigned values a field `width` bits wide holds."""
    return range(1 << width)


VECTOR_BASE = Option(
    "vector_base", "number", "Where the ARM exception vectors are (default: as high_vectors says).",
    allowed=bits(32),
)
HIGH_VECTORS = Option(
    "high_vectors", "flag", "ARM exception vectors at 0xFFFF0000 (SCTLR.V set), not 0.", default=False
)
ARM_VECTOR_OPTIONS = (VECTOR_BASE, HIGH_VECTORS)
"""The options of formats whose exceptions run ARM vectors the trace does not give."""


def arm_vector_base(options: Mapping[str, Any]) -> int:
    """Where ARM exception vectors are: `vector_base`, else high (0xFFFF0000) or low (0)."""
    base = VECTOR_BASE.read(options)
    if base is not None:
        return base
    return HIGH_VECTOR_BASE if HIGH_VECTORS.read(options) else 0
