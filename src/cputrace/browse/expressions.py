"""Address expressions typed into the browser: `main+0x10`, `sp+16`, `buffer`, `(x1-x2)*4`.

Parsed with Python's `ast` and evaluated over a few node kinds only (integers, names, unary
and binary + - *, // and bit operations, parentheses): never `eval`. Names are registers of
the cursor's core at the cursor, then symbols of the image. A symbol whose name is not an
identifier (`foo.bar`, `$x`) is found when it is the whole expression.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

from ..errors import BrowseError

MAX_LENGTH = 1000
"""Characters an expression may have."""
ADDRESS_LIMIT = 1 << 64

_BINARY: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY: dict[type, Callable[[int], int]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_MAX_SHIFT = 64

Resolver = Callable[[str], int | None]
"""The value of a name, or None when the name is unknown."""


def evaluate(text: str, resolve: Resolver) -> int:
    """The value of `text`, an address in [0, 2**64); BrowseError (a message for a status line)
    for malformed text, an unknown name or a value outside the address space."""
    text = text.strip()
    if not text:
        raise BrowseError("empty expression")
    if len(text) > MAX_LENGTH:
        raise BrowseError(f"expression longer than {MAX_LENGTH} characters")
    whole = resolve(text)
    if whole is not None:
        return _address(whole, text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise BrowseError(f"not an expression: {text!r} ({exc.msg})") from None
    return _address(_value(tree.body, resolve), text)


def _address(value: int, text: str) -> int:
    if not 0 <= value < ADDRESS_LIMIT:
        raise BrowseError(f"{text!r} is {value:#x}, outside the 64-bit address space")
    return value


def _value(node: ast.expr, resolve: Resolver) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        value = resolve(node.id)
        if value is None:
            raise BrowseError(f"unknown name {node.id!r}: not a register or a symbol")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, resolve))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left, resolve), _value(node.right, resolve)
        if isinstance(node.op, ast.LShift | ast.RShift) and not 0 <= right <= _MAX_SHIFT:
            raise BrowseError(f"shift by {right}: shifts go from 0 to {_MAX_SHIFT}")
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and right == 0:
            raise BrowseError("division by zero")
        return _BINARY[type(node.op)](left, right)
    shown = ast.unparse(node) if isinstance(node, ast.AST) else repr(node)
    raise BrowseError(f"not allowed in an expression: {shown!r} (numbers, names, + - * // % << >> & | ^ ~)")
