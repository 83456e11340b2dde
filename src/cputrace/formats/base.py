"""What every input decoder provides, and the context it decodes in."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import pyarrow as pa

from ..errors import CputraceError, TraceFormatError, UsageError
from ..inputs import InputFile

if TYPE_CHECKING:
    from ..image import Image

Batch = dict[str, pa.Table]
"""Rows for some of the model's tables, in input order; `seq` counts from 0 per input."""

MAX_WARNINGS_KEPT = 50
HIGH_VECTORS = 0xFFFF0000
"""Where ARM exception vectors are with SCTLR.V set."""


@dataclass
class DecodeContext:
    """Options and the warning tally of one ingest."""

    strict: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    warnings: int = 0
    warning_samples: list[str] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    _image: Image | None = field(default=None, repr=False)

    def image(self) -> Image | None:
        """The program image given as `images` (`PATH[@ADDR]` specs, merged), loaded once."""
        if self._image is None and self.options.get("images"):
            from ..image import Image, load_image_spec  # ELF/DWARF readers load only for images

            self._image = Image.merge(load_image_spec(spec) for spec in self.options["images"])
        return self._image

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


class Decoder(Protocol):
    name: ClassVar[str]

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        """The input's records as batches of model rows."""
        ...


def option_error(name: str, value: Any, expected: str) -> UsageError:
    """The error for a decoder option given a value it cannot take: bad usage (exit 2 on the
    command line), naming the option, the value given and what is allowed."""
    return UsageError(f"option {name}: expected {expected}, got {value!r}")


def option_number(options: Mapping[str, Any], name: str, *, bits: int | None = None) -> int | None:
    """A numeric decoder option: an int, or a string in any base Python reads (0x...); with
    `bits`, one that fits in that many bits (0 to 2**bits - 1)."""
    value = options.get(name)
    if value is None:
        return None
    expected = "a number" if bits is None else f"a number from 0 to {(1 << bits) - 1:#x}"
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        try:
            number = int(str(value).strip(), 0)
        except ValueError:  # not a number, or one of over 4,300 digits
            raise option_error(name, value, expected) from None
    if bits is not None and not 0 <= number < 1 << bits:
        raise option_error(name, value, expected)
    return number


def option_flag(options: Mapping[str, Any], name: str) -> bool:
    """A yes/no decoder option: a bool, or true/false, yes/no, on/off, 1/0."""
    value = options.get(name)
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise option_error(name, value, "true or false (yes/no, on/off, 1/0)")


def option_choice(
    options: Mapping[str, Any], name: str, choices: Sequence[str], default: str | None
) -> str | None:
    """A decoder option that names one of `choices` (in any case), as it is spelled there;
    `default` when the option is not given."""
    value = options.get(name)
    if value is None:
        return default
    wanted = str(value).strip().lower()
    for choice in choices:
        if choice.lower() == wanted:
            return choice
    raise option_error(name, value, f"one of {', '.join(choices)}")


def arm_vector_base(options: Mapping[str, Any]) -> int:
    """Where ARM exception vectors are: `vector_base`, else high (0xFFFF0000) or low (0)."""
    base = option_number(options, "vector_base", bits=32)
    if base is not None:
        return base
    return HIGH_VECTORS if option_flag(options, "high_vectors") else 0
