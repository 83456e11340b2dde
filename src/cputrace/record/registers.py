"""Reading the traced registers after every instruction, and telling which ones changed."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

from unicorn import Uc, UcError
from unicorn.unicorn_py3.unicorn import uclib


class RegisterReader:
    """A fixed list of registers read in one call into unicorn's C API.

    The Python binding's cost is per register and call; one batch read through prepared
    ctypes arrays costs about what one register does, and it runs once per instruction.
    """

    def __init__(self, uc: Uc, ids: Sequence[int]) -> None:
        count = len(ids)
        self._handle = uc._uch  # the engine handle the binding's own methods pass to uclib
        self._ids = (ctypes.c_int * count)(*ids)
        self._values = (ctypes.c_uint64 * count)()  # 32-bit registers fill the low half
        base = ctypes.addressof(self._values)
        self._pointers = (ctypes.c_void_p * count)(*(base + 8 * i for i in range(count)))
        self._count = count

    def read(self) -> list[int]:
        status = uclib.uc_reg_read_batch(self._handle, self._ids, self._pointers, self._count)
        if status:
            raise UcError(status)
        return self._values[:]


class RegisterTracker:
    """Which registers an instruction wrote, by comparing reads under their banked names.

    While the mode stays the same (the names are the same tuple), a read is compared with
    the previous one position by position. After a mode switch each name is compared with
    the last value known under it; a bank seen for the first time becomes the baseline
    silently, since the instruction that switched mode did not write it. Registers the
    recorder itself sets (exception entry) are noted and always reported.
    """

    def __init__(self) -> None:
        self._known: dict[str, int] = {}  # banked registers not in the current view
        self._noted: dict[str, tuple[int, int]] = {}
        self._names: tuple[str | None, ...] = ()
        self._values: list[int] = []

    def note(self, name: str, value: int, width: int) -> None:
        """Report `name` as written with `value` (`width` bytes) at the next `changes`."""
        self._noted[name] = (value, width)

    def changes(
        self,
        names: tuple[str | None, ...],
        values: list[int],
        widths: Sequence[int],
        written: int | None = None,
    ) -> list[tuple[str, int, int]]:
        """(name, value, width) of the noted registers, then of those whose value changed, and
        of the register at index `written` if the instruction is known to write it (a call's
        link register, which often receives the value it already held)."""
        if names is self._names:
            changed = [
                (name, value, width)
                for name, value, old, width in zip(names, values, self._values, widths, strict=True)
                if value != old and name is not None
            ]
        else:
            changed = self._switched(names, values, widths)
        self._names, self._values = names, values
        if written is not None and all(write[0] != names[written] for write in changed):
            changed.append((names[written], values[written], widths[written]))
        if not self._noted:
            return changed
        noted = self._noted
        written = [(name, value, width) for name, (value, width) in noted.items()]
        written += [write for write in changed if write[0] not in noted]
        noted.clear()
        return written

    def _switched(
        self, names: tuple[str | None, ...], values: list[int], widths: Sequence[int]
    ) -> list[tuple[str, int, int]]:
        known = self._known
        previous = zip(self._names, self._values, strict=True)
        known.update((name, value) for name, value in previous if name is not None)
        known.update((name, value) for name, (value, _) in self._noted.items())
        changed = []
        for name, value, width in zip(names, values, widths, strict=True):
            if name is None:
                continue
            old = known.get(name)
            if old is not None and old != value:
                changed.append((name, value, width))
        return changed

    def baseline(
        self, names: tuple[str | None, ...], values: list[int], widths: Sequence[int]
    ) -> list[tuple[str, int, int]]:
        """Take these values as known and return them all, for the trace's opening state."""
        self._names, self._values = names, values
        return [(n, v, w) for n, v, w in zip(names, values, widths, strict=True) if n is not None]
