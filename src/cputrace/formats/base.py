"""What every input decoder provides, and the context it decodes in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import pyarrow as pa

from ..errors import CputraceError, TraceFormatError
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


def option_number(options: dict[str, Any], name: str) -> int | None:
    """A numeric decoder option: an int, or a string in any base Python reads (0x...)."""
    value = options.get(name)
    if value is None or isinstance(value, int):
        return value
    try:
        return int(str(value), 0)
    except ValueError:
        raise CputraceError(f"option {name}: expected a number, got {value!r}") from None


def option_flag(options: dict[str, Any], name: str) -> bool:
    """A yes/no decoder option: a bool, or true/false, yes/no, on/off, 1/0."""
    value = options.get(name)
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise CputraceError(f"option {name}: expected true or false, got {value!r}")


def arm_vector_base(options: dict[str, Any]) -> int:
    """Where ARM exception vectors are: `vector_base`, else high (0xFFFF0000) or low (0)."""
    base = option_number(options, "vector_base")
    if base is not None:
        return base
    return HIGH_VECTORS if option_flag(options, "high_vectors") else 0
