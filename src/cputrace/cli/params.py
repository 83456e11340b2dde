"""Parameter types that several commands share."""

from __future__ import annotations

from typing import Any

import click


def address(text: str) -> int:
    """A non-negative integer in Python syntax (hex as 0x...), or click.BadParameter."""
    try:
        value = int(text, 0)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a number (write hex as 0x...)") from None
    if value < 0:
        raise click.BadParameter(f"{text!r} is negative")
    return value


class Number(click.ParamType):
    """An integer in Python syntax, so addresses can be given in hex."""

    name = "NUMBER"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return address(value)
        except click.BadParameter as exc:
            self.fail(exc.message, param, ctx)


NUMBER = Number()
