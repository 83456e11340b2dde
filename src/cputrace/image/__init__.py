"""Program images: memory regions with bytes, symbols and source lines, from many file kinds."""

from .arch import Architecture, CodeRange
from .elf import load_elf
from .errors import ImageError
from .ihex import load_ihex
from .memory import Image, Region
from .raw import load_raw
from .sourcelines import LineTable
from .spec import load_image_spec, load_image_specs, parse_image_spec, sniff_image
from .srec import load_srec
from .symbols import Binding, StateRange, Symbol, SymbolKind, SymbolTable

__all__ = [
    "Architecture",
    "Binding",
    "CodeRange",
    "Image",
    "ImageError",
    "LineTable",
    "Region",
    "StateRange",
    "Symbol",
    "SymbolKind",
    "SymbolTable",
    "load_elf",
    "load_ihex",
    "load_image_spec",
    "load_image_specs",
    "load_raw",
    "load_srec",
    "parse_image_spec",
    "sniff_image",
]
