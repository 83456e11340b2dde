"""The error types users see (bad input, exit 1, versus everything else); how an OSError reads."""

from __future__ import annotations

import errno
import os
import unicodedata

SHOWN_BYTES = 16
"""Bytes of a binary `got` shown (in hex) in a message."""


class CputraceError(Exception):
    """Base of the errors cputrace reports to users without a traceback."""


class TraceFormatError(CputraceError):
    """Input that does not follow its format: names the file, where, and what was expected."""

    def __init__(
        self,
        path: str,
        where: str,
        expected: str,
        got: str | bytes | None = None,
    ) -> None:
        self.path = path
        self.where = where
        self.expected = expected
        self.got = got
        message = f"{path}:{where}: expected {expected}"
        if got is not None:
            message += f", got {shown(got)}"
        super().__init__(message)


def shown(got: str | bytes) -> str:
    """What a message shows of what was found: text quoted (cut at 120 characters), anything
    binary as its first bytes in hex, never raw control characters."""
    text = got.decode("latin-1") if isinstance(got, bytes) else got
    if not _binary(text):
        return repr(text if len(text) <= 120 else text[:117] + "...")
    data = got if isinstance(got, bytes) else _bytes_of(text)
    more = " ..." if len(data) > SHOWN_BYTES else ""
    return f"binary data, bytes {data[:SHOWN_BYTES].hex(' ')}{more}"


def _binary(text: str) -> bool:
    """Control characters other than tab, bytes left undecoded, or bytes replaced in decoding."""
    return "\ufffd" in text or any(unicodedata.category(c) in ("Cc", "Cs") and c != "\t" for c in text)


def _bytes_of(text: str) -> bytes:
    """The bytes a decoder read as `text`: Latin-1 when that covers it, else UTF-8 (surrogates
    from `surrogateescape` back to their bytes; a character a decoder replaced is lost)."""
    if all(ord(c) < 256 for c in text):
        return text.encode("latin-1")
    return text.encode("utf-8", "surrogateescape")


class StoreError(CputraceError):
    """A store that cannot be opened: missing, damaged, or of a newer model version."""


class UsageError(CputraceError):
    """A request that cannot be carried out as asked (an output that is not a store, SQL that
    is not one expression): the caller's to change, exit 2 on the command line."""


class MissingExtra(UsageError, ImportError):
    """A part of cputrace whose optional dependency, a pip extra, is not installed."""

    def __init__(self, part: str, package: str, extra: str) -> None:
        super().__init__(f"{part} needs {package}, the {extra} extra: pip install 'cputrace[{extra}]'")
        self.name = package


class BrowseError(UsageError):
    """A browser request that cannot be answered as typed (an unknown symbol, a malformed
    expression, a seq past the end): its message is shown in the browser's status line."""


WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""Errors of writing to an open file (a full disk, a quota, a file too big), which name no file:
whoever writes names the output in their message."""


def os_error_text(exc: OSError) -> str:
    """`PATH: reason` (both paths of a rename or copy), or the reason alone when it names no file."""
    reason = exc.strerror or str(exc)
    paths = [os.fsdecode(p) if isinstance(p, bytes) else str(p) for p in (exc.filename, exc.filename2)
             if p is not None]  # fmt: skip
    return f"{' -> '.join(paths)}: {reason}" if paths else reason
