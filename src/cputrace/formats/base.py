"""What every input decoder provides, and the context it decodes in."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import pyarrow as pa

from ..errors import TraceFormatError
from ..image import Image, load_image_spec
from ..inputs import InputFile

Batch = dict[str, pa.Table]
"""Rows for some of the model's tables, in input order; `seq` counts from 0 per input."""

MAX_WARNINGS_KEPT = 50


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
            self._image = Image.merge(load_image_spec(spec) for spec in self.options["images"])
        return self._image

    def warn(self, path: str, where: str, message: str) -> None:
        self.warnings += 1
        if len(self.warning_samples) < MAX_WARNINGS_KEPT:
            self.warning_samples.append(f"{path}:{where}: {message}")

    def reject(self, path: str, where: str, expected: str, got: str) -> None:
        """An unparsable record: an error in strict mode, a counted warning otherwise."""
        if self.strict:
            raise TraceFormatError(path, where, expected, got)
        self.warn(path, where, f"kept as text: expected {expected}")


class Decoder(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]

    def sniff(self, head: bytes) -> int:
        """How sure (0-100) that an input starting with `head` is in this format."""
        ...

    def decode(self, source: InputFile, ctx: DecodeContext) -> Iterator[Batch]:
        """The input's records as batches of model rows."""
        ...
