"""The error types users see: bad input (exit 1) versus everything else."""

from __future__ import annotations


class CputraceError(Exception):
    """Base of the errors cputrace reports to users without a traceback."""


class TraceFormatError(CputraceError):
    """Input that does not follow its format: names the file, where, and what was expected."""

    def __init__(
        self,
        path: str,
        where: str,
        expected: str,
        got: str | None = None,
    ) -> None:
        self.path = path
        self.where = where
        self.expected = expected
        self.got = got
        message = f"{path}:{where}: expected {expected}"
        if got is not None:
            shown = got if len(got) <= 120 else got[:117] + "..."
            message += f", got {shown!r}"
        super().__init__(message)


class StoreError(CputraceError):
    """A store that cannot be opened: missing, damaged, or of a newer model version."""


class UsageError(CputraceError):
    """A request that cannot be carried out as asked (an output that is not a store, SQL that
    is not one expression): the caller's to change, exit 2 on the command line."""
