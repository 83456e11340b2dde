"""Program images: regions, loaders (ELF, raw, Intel HEX, S-record, snapshot dumps), symbols, lines."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import zstandard
from elftools.elf.elffile import ELFFile
from paths import shared

from cputrace.coresight.dumps import DumpEntry, load_snapshot_device, load_snapshot_dumps, read_dump_entries
from cputrace.errors import CputraceError
from cputrace.image import (
    Image,
    ImageError,
    Region,
    Symbol,
    SymbolKind,
    SymbolTable,
    load_elf,
    load_ihex,
    load_image_spec,
    load_raw,
    load_srec,
    parse_image_spec,
    sourcelines,
)
from cputrace.image.symbols import Binding
from cputrace.model import Isa

DATA = Path(__file__).parent / "data" / "image"
QUICKSORT = DATA / "quicksort.elf"
CALLTEST32 = DATA / "calltest32.elf"
CALCULATOR64 = DATA / "calculator-aarch64.elf"


def segment_bytes(path: Path) -> list[tuple[int, bytes]]:
    """(vaddr, file bytes) of each PT_LOAD segment, read independently with pyelftools."""
    with open(path, "rb") as stream:
        elf = ELFFile(stream)
        return [
            (s["p_vaddr"], s.data())
            for s in elf.iter_segments()
            if s["p_type"] == "PT_LOAD" and s["p_filesz"]
        ]


# --- a minimal ELF32 writer, for what the real fixtures lack (Thumb, duplicates, LMA != VMA)


def elf32(
    segments: list[tuple[int, int, bytes]],
    symbols: list[tuple[str, int, int, int, int]],
    filesz_extra: int = 0,
) -> bytes:
    """An Arm ELF32 executable: segments (vaddr, paddr, bytes) and symbols
    (name, value, size, type, bind) defined in a .text section over the first segment."""
    phoff = 52
    data_offset = phoff + 32 * len(segments)
    blobs, offsets = [], []
    offset = data_offset
    for _, _, data in segments:
        offsets.append(offset)
        blobs.append(data)
        offset += len(data)
    strtab = b"\0"
    symtab = bytes(16)
    ordered = sorted(symbols, key=lambda s: s[4] != 0)  # locals first
    for name, value, size, kind, bind in ordered:
        symtab += struct.pack("<IIIBBH", len(strtab), value, size, (bind << 4) | kind, 0, 1)
        strtab += name.encode() + b"\0"
    first_global = 1 + sum(1 for s in ordered if s[4] == 0)
    shstrtab = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    symtab_offset = offset
    strtab_offset = symtab_offset + len(symtab)
    shstrtab_offset = strtab_offset + len(strtab)
    shoff = shstrtab_offset + len(shstrtab)
    header = b"\x7fELF\x01\x01\x01" + bytes(9)
    header += struct.pack(
        "<HHIIIIIHHHHHH", 2, 40, 1, segments[0][0], phoff, shoff, 0x05000000, 52, 32,
        len(segments), 40, 5, 4,
    )  # fmt: skip
    program = b"".join(
        struct.pack("<IIIIIIII", 1, off, vaddr, paddr, len(data) + filesz_extra, len(data), 5, 4)
        for (vaddr, paddr, data), off in zip(segments, offsets, strict=True)
    )
    text_vaddr, _, text = segments[0]
    sections = bytes(40) + b"".join(
        struct.pack("<IIIIIIIIII", *fields)
        for fields in (
            (1, 1, 6, text_vaddr, offsets[0], len(text), 0, 0, 4, 0),
            (7, 2, 0, 0, symtab_offset, len(symtab), 3, first_global, 4, 16),
            (15, 3, 0, 0, strtab_offset, len(strtab), 0, 0, 1, 0),
            (23, 3, 0, 0, shstrtab_offset, len(shstrtab), 0, 0, 1, 0),
        )
    )
    return header + program + b"".join(blobs) + symtab + strtab + shstrtab + sections


FUNC, OBJECT, NOTYPE = 2, 1, 0
LOCAL, GLOBAL = 0, 1
THUMB_CODE = bytes.fromhex("10b500bf00bf10bd")  # push {r4,lr}; nop; nop; pop {r4,pc}
ARM_CODE = bytes.fromhex("1eff2fe1")  # bx lr
TABLE = bytes.fromhex("78563412")
MAPPED = [("$t", 0x8000, 0, NOTYPE, LOCAL), ("$a.1", 0x8008, 0, NOTYPE, LOCAL)]
MAPPED += [("$d.2", 0x800C, 0, NOTYPE, LOCAL)]
NAMED = [
    ("thumb_func", 0x8001, 8, FUNC, GLOBAL),
    ("arm_alias", 0x8008, 0, NOTYPE, GLOBAL),
    ("local_func", 0x8008, 4, FUNC, LOCAL),
    ("arm_func", 0x8008, 4, FUNC, GLOBAL),
    ("table", 0x800C, 4, OBJECT, GLOBAL),
]


@pytest.fixture
def arm_elf(tmp_path: Path) -> Path:
    path = tmp_path / "thumb.elf"
    path.write_bytes(elf32([(0x8000, 0x80000, THUMB_CODE + ARM_CODE + TABLE)], MAPPED + NAMED))
    return path


# --- Image -----------------------------------------------------------------------------------


def test_image_reads_within_and_across_adjacent_regions() -> None:
    image = Image([Region(0x1004, b"\x05\x06", "b"), Region(0x1000, b"\x01\x02\x03\x04", "a")])
    assert [r.name for r in image.regions] == ["a", "b"]
    assert image.read(0x1001, 2) == b"\x02\x03"
    assert image.read(0x1002, 4) == b"\x03\x04\x05\x06"
    assert image.read_upto(0x1003, 100) == b"\x04\x05\x06"
    assert image.read_upto(0x2000, 4) == b""
    assert image.contains(0x1000, 6)
    assert not image.contains(0x1000, 7)
    assert not image.contains(0xFFF)


def test_read_outside_names_first_missing_address() -> None:
    image = Image([Region(0x1000, bytes(8), "a")])
    with pytest.raises(ImageError, match="0x1008 is not in the program image"):
        image.read(0x1006, 4)
    with pytest.raises(ImageError, match="0x800 is not"):
        image.read(0x800, 1)
    with pytest.raises(ImageError, match="holds nothing"):
        Image().read(0, 1)


def test_overlapping_regions_rejected_naming_both() -> None:
    with pytest.raises(ImageError) as info:
        Image([Region(0x1000, bytes(16), "first.bin"), Region(0x100C, bytes(16), "second.bin")])
    message = str(info.value)
    assert "first.bin [0x1000-0x1010)" in message
    assert "second.bin [0x100c-0x101c)" in message
    assert isinstance(info.value, CputraceError)


def test_merge_keeps_regions_and_symbols() -> None:
    a = Image([Region(0, b"ab", "a")], SymbolTable([Symbol("x", 0, 2)]))
    b = Image([Region(2, b"cd", "b")], SymbolTable([Symbol("y", 2, 2)]))
    merged = Image.merge([a, b])
    assert merged.read(0, 4) == b"abcd"
    assert merged.symbols.lookup(3) == ("y", 1)
    with pytest.raises(ImageError, match="overlaps"):
        Image.merge([a, a])


# --- ELF -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["quicksort.elf", "calltest32.elf", "calltest64.elf", "calculator-aarch32.elf"]
)
def test_elf_segments_are_file_bytes_at_vaddr(name: str) -> None:
    image = load_elf(DATA / name)
    expected = segment_bytes(DATA / name)
    assert [(r.start, bytes(r.data)) for r in image.regions] == expected
    for start, data in expected:
        assert image.read(start, len(data)) == data


def test_quicksort_code_bytes() -> None:
    image = load_elf(QUICKSORT)
    assert image.read(0x8000, 4) == bytes.fromhex("0002a0d2")  # mov x0, #0x100000
    with pytest.raises(ImageError, match="0x8124"):
        image.read(0x8120, 8)


def test_quicksort_symbols_including_the_lowest() -> None:
    symbols = load_elf(QUICKSORT).symbols
    assert sorted(s.name for s in symbols) == [
        "_start", "array", "c_entry", "quicksort", "sys_exit", "sys_write0",
    ]  # fmt: skip
    assert symbols.lookup(0x8000) == ("_start", 0)  # lowest symbol: the reference tool misses it
    assert symbols.lookup(0x8008) == ("_start", 8)
    assert symbols.lookup(0x800C) == ("c_entry", 0)
    assert symbols.lookup(0x8040) == ("quicksort", 8)
    assert symbols.lookup(0x80F8) == ("sys_write0", 12)
    assert symbols.lookup(0x8100) == ("array", 4)
    assert symbols.lookup(0x7FFC) is None
    assert symbols.lookup(0x8121) is None  # past the 37-byte array
    assert symbols.address_of("quicksort") == 0x8038
    assert symbols.address_of("nonexistent") is None
    assert symbols.state_at(0x8000) is Isa.A64
    assert symbols.state_at(0x80F8) is Isa.A64
    assert symbols.state_at(0x80FC) is None
    assert symbols.is_data(0x80FC)
    assert not symbols.is_data(0x8000)


def test_calltest32_labels_and_mapping_symbols() -> None:
    symbols = load_elf(CALLTEST32).symbols
    names = {s.name for s in symbols}
    assert "$a.0" not in names and "$d.1" not in names
    assert symbols.lookup(0x200B4) == ("_start", 0)  # lowest symbol
    assert symbols.lookup(0x200E4) == ("_start", 0x30)  # the sized function contains the label
    assert symbols.lookup(0x20118) == ("leaf_bx_lr", 0)  # zero-size labels after it
    assert symbols.lookup(0x20124) == ("leaf_bx_lr", 12)
    assert symbols.lookup(0x20138) == ("nonleaf_pop_pc", 0)
    assert symbols.state_at(0x200B4) is Isa.A32
    assert symbols.state_at(0x201E8) is Isa.A32
    assert symbols.is_data(0x201EC)
    assert symbols.state_at(0x10000) is None


def test_lookup_many_matches_lookup() -> None:
    symbols = load_elf(CALCULATOR64).symbols
    lowest = min(s.address for s in symbols)
    assert symbols.lookup(lowest) == ("_start", 0)
    addresses = np.arange(0x200000, 0x211600, 2, dtype=np.uint64)
    indices = symbols.lookup_many(addresses)
    assert indices.dtype == np.int32
    for address, index in zip(addresses.tolist(), indices.tolist(), strict=True):
        found = symbols.lookup(address)
        if index < 0:
            assert found is None
        else:
            symbol = symbols.symbols[index]
            assert found == (symbol.name, address - symbol.address)
    offsets = addresses - symbols.addresses[np.maximum(indices, 0)]
    hit = addresses == np.uint64(0x2109BC + 8)
    assert symbols.symbols[indices[hit][0]].name == "c_entry"
    assert offsets[hit][0] == 8


def test_lookup_many_of_empty_table() -> None:
    assert SymbolTable().lookup_many(np.array([1, 2], dtype=np.uint64)).tolist() == [-1, -1]
    assert SymbolTable().lookup(5) is None


def test_thumb_functions_mapping_symbols_and_duplicates(arm_elf: Path) -> None:
    image = load_elf(arm_elf)
    assert image.regions[0].start == 0x8000  # p_vaddr, not p_paddr 0x80000
    symbols = image.symbols
    thumb = next(s for s in symbols if s.name == "thumb_func")
    assert (thumb.address, thumb.isa, thumb.kind) == (0x8000, Isa.T32, SymbolKind.FUNC)
    assert symbols.lookup(0x8000) == ("thumb_func", 0)
    assert symbols.lookup(0x8006) == ("thumb_func", 6)
    assert symbols.address_of("thumb_func") == 0x8000
    assert [s.name for s in symbols.symbols_at(0x8008)] == ["arm_func", "local_func", "arm_alias"]
    assert symbols.lookup(0x8008) == ("arm_func", 0)  # FUNC over NOTYPE, global over local
    assert symbols.prefer("arm_alias").lookup(0x800A) == ("arm_alias", 2)
    assert symbols.prefer("local_func").lookup(0x8008) == ("local_func", 0)
    assert symbols.lookup(0x800C) == ("table", 0)
    assert symbols.state_at(0x8002) is Isa.T32
    assert symbols.state_at(0x8008) is Isa.A32
    assert symbols.state_at(0x800C) is None and symbols.is_data(0x800C)


def test_thumb_state_from_function_symbols_without_mapping(tmp_path: Path) -> None:
    path = tmp_path / "nomap.elf"
    path.write_bytes(elf32([(0x8000, 0x8000, THUMB_CODE + ARM_CODE + TABLE)], NAMED))
    symbols = load_elf(path).symbols
    assert symbols.state_at(0x8004) is Isa.T32
    assert symbols.state_at(0x8008) is Isa.A32
    assert symbols.state_at(0x800C) is None
    assert not symbols.is_data(0x800C)


def test_load_offset_moves_everything(arm_elf: Path) -> None:
    image = load_elf(arm_elf, load_offset=0x1000)
    assert image.regions[0].start == 0x9000
    assert image.read(0x9000, 2) == THUMB_CODE[:2]
    assert image.symbols.lookup(0x9004) == ("thumb_func", 4)
    assert image.symbols.state_at(0x9008) is Isa.A32
    assert image.symbols.is_data(0x900C)


def test_symbol_preference_explicit_table() -> None:
    table = SymbolTable(
        [
            Symbol("label", 0x100),
            Symbol("weak_fn", 0x100, 8, SymbolKind.FUNC, Binding.WEAK),
            Symbol("object", 0x100, 8, SymbolKind.OBJECT),
            Symbol("inner", 0x104, 2, SymbolKind.FUNC),
            Symbol("after", 0x110),
        ]
    )
    assert table.lookup(0x100) == ("weak_fn", 0)
    assert table.lookup(0x105) == ("inner", 1)  # innermost sized symbol
    assert table.lookup(0x106) == ("weak_fn", 6)
    assert table.lookup(0x108) is None  # gap after the sized symbol
    assert table.lookup(0x200) == ("after", 0xF0)  # zero size reaches on
    assert table.prefer("label").lookup(0x106) == ("label", 6)
    assert table.lookup_many(np.array([0xFF, 0x100, 0x105, 0x108, 0x111])).tolist() == [
        -1, 1, 3, -1, 4,
    ]  # fmt: skip


def test_overlapping_segments_rejected(tmp_path: Path) -> None:
    path = tmp_path / "overlap.elf"
    path.write_bytes(elf32([(0x8000, 0x8000, bytes(16)), (0x8008, 0x8008, bytes(16))], []))
    with pytest.raises(ImageError) as info:
        load_elf(path)
    assert "overlap.elf segment 0" in str(info.value)
    assert "overlap.elf segment 1" in str(info.value)


def test_segment_past_end_of_file(tmp_path: Path) -> None:
    path = tmp_path / "short.elf"
    path.write_bytes(elf32([(0x8000, 0x8000, bytes(16))], [], filesz_extra=0x10000))
    with pytest.raises(ImageError, match=r"short\.elf: segment 0 .*truncated"):
        load_elf(path)


@pytest.mark.parametrize("length", [0, 3, 16, 40, 52, 0x50, 0x100, 0x258, 0x400, 1719])
def test_truncated_elf_is_an_image_error(tmp_path: Path, length: int) -> None:
    path = tmp_path / "cut.elf"
    path.write_bytes(QUICKSORT.read_bytes()[:length])
    with pytest.raises(ImageError, match=r"cut\.elf"):
        load_elf(path)


def test_missing_file_is_an_image_error(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"nothere\.elf: cannot read"):
        load_elf(tmp_path / "nothere.elf")
    with pytest.raises(ImageError, match=r"nothere\.bin: cannot read"):
        load_image_spec(f"{tmp_path / 'nothere.bin'}@0x100")


# --- DWARF line tables -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5])
def test_lines_for_addresses(version: int) -> None:
    image = load_elf(DATA / f"lines-dwarf{version}.elf")
    lines = image.lines
    assert lines.lines_for(0x401000) == ("lines.c", 6)  # square
    assert lines.lines_for(0x40100E) == ("lines.c", 8)
    assert lines.lines_for(0x40100F) == ("lines.c", 11)  # accumulate
    assert lines.lines_for(0x401058) == ("lines.c", 20)  # _start
    assert lines.lines_for(0x401068) == ("util/helper.c", 4)  # twice, in a second unit
    assert lines.lines_for(0x401075) == ("util/helper.c", 6)
    assert lines.lines_for(0x401076) is None  # end of the last sequence
    assert lines.lines_for(0x400FFF) is None
    files, numbers = lines.lines_for_many(np.array([0x401000, 0x401068, 0x500000, 0x40102A], dtype=np.uint64))
    names = [lines.files[f] if f >= 0 else None for f in files.tolist()]
    assert names == ["lines.c", "util/helper.c", None, "lines.c"]
    assert numbers.tolist() == [6, 4, 0, 14]
    assert image.symbols.lookup(0x401068) == ("twice", 0)


def test_lines_parsed_lazily_once_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "copy.elf"
    shutil.copy(DATA / "lines-dwarf5.elf", path)
    sourcelines._rows_for.cache_clear()
    first = load_elf(path)
    assert sourcelines._rows_for.cache_info().misses == 0  # nothing parsed yet
    assert first.lines.lines_for(0x401000) == ("lines.c", 6)
    assert sourcelines._rows_for.cache_info().misses == 1
    second = load_elf(path)
    assert second.lines.lines_for(0x401007) == ("lines.c", 7)
    info = sourcelines._rows_for.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_elf(path).lines.lines_for(0x401000) == ("lines.c", 6)
    assert sourcelines._rows_for.cache_info().misses == 2  # changed file: parsed again


def test_lines_with_load_offset_and_without_dwarf() -> None:
    moved = load_elf(DATA / "lines-dwarf4.elf", load_offset=0x10000)
    assert moved.lines.lines_for(0x411068) == ("util/helper.c", 4)
    assert moved.lines.lines_for(0x401068) is None
    assert load_elf(QUICKSORT).lines.lines_for(0x8000) is None
    assert Image().lines.lines_for(0) is None


def test_damaged_line_table_is_an_image_error(tmp_path: Path) -> None:
    sourcelines._rows_for.cache_clear()
    data = bytearray((DATA / "lines-dwarf5.elf").read_bytes())
    with open(DATA / "lines-dwarf5.elf", "rb") as stream:
        offset = ELFFile(stream).get_section_by_name(".debug_line")["sh_offset"]
    data[offset : offset + 4] = struct.pack("<I", 0x7FFFFFF0)  # unit length past the section
    path = tmp_path / "damaged.elf"
    path.write_bytes(bytes(data))
    image = load_elf(path)
    with pytest.raises(ImageError, match=r"damaged\.elf: damaged DWARF line table"):
        image.lines.lines_for(0x401000)


def test_section_past_end_of_file(tmp_path: Path) -> None:
    data = bytearray((DATA / "lines-dwarf4.elf").read_bytes())
    with open(DATA / "lines-dwarf4.elf", "rb") as stream:
        elf = ELFFile(stream)
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".debug_line")
        header = elf["e_shoff"] + index * elf["e_shentsize"]
    data[header + 32 : header + 40] = struct.pack("<Q", 1 << 40)  # sh_size of .debug_line
    path = tmp_path / "huge.elf"
    path.write_bytes(bytes(data))
    with pytest.raises(ImageError, match=r"huge\.elf: section \d+ \(\.debug_line\) .*truncated"):
        load_elf(path)


# --- raw binaries, Intel HEX, S-records, image specs -------------------------------------------


def ihex_text(chunks: list[tuple[int, bytes]], width: int = 16) -> str:
    """Intel HEX for (address, bytes) chunks, with type 04 records for 64 KiB pages."""

    def record(kind: int, address: int, data: bytes) -> str:
        body = bytes([len(data), address >> 8 & 0xFF, address & 0xFF, kind]) + data
        return ":" + (body + bytes([-sum(body) & 0xFF])).hex().upper()

    lines, page = [], None
    for start, data in chunks:
        for offset in range(0, len(data), width):
            address = start + offset
            if address >> 16 != page:
                page = address >> 16
                lines.append(record(4, 0, page.to_bytes(2, "big")))
            lines.append(record(0, address & 0xFFFF, data[offset : offset + width]))
    return "\n".join([*lines, record(1, 0, b"")]) + "\n"


def srec_text(chunks: list[tuple[int, bytes]], width: int = 16) -> str:
    """S3 records (32-bit addresses) for the chunks, with S0, S5 and S7 around them."""

    def record(kind: str, address: bytes, data: bytes) -> str:
        body = bytes([len(address) + len(data) + 1]) + address + data
        return f"S{kind}" + (body + bytes([~sum(body) & 0xFF])).hex().upper()

    data_records = [
        record("3", (start + offset).to_bytes(4, "big"), data[offset : offset + width])
        for start, data in chunks
        for offset in range(0, len(data), width)
    ]
    return (
        "\n".join(
            [
                record("0", bytes(2), b"cputrace"),
                *data_records,
                record("5", len(data_records).to_bytes(2, "big"), b""),
                record("7", chunks[0][0].to_bytes(4, "big"), b""),
            ]
        )
        + "\n"
    )


@pytest.fixture
def calltest_chunks() -> list[tuple[int, bytes]]:
    return segment_bytes(CALLTEST32)  # two segments, both above 64 KiB


def test_ihex_round_trip(tmp_path: Path, calltest_chunks: list[tuple[int, bytes]]) -> None:
    path = tmp_path / "calltest.hex"
    path.write_text(ihex_text(calltest_chunks))
    for image in (load_ihex(path), load_image_spec(str(path))):
        assert [(r.start, bytes(r.data)) for r in image.regions] == calltest_chunks
    moved = load_image_spec(f"{path}@0x100")
    assert moved.read(0x20100 + 0xB4, 4) == calltest_chunks[1][1][:4]


def test_ihex_segment_address_records(tmp_path: Path) -> None:
    path = tmp_path / "segment.hex"
    path.write_text(":020000021000EC\n:0400100001020304E2\n:00000001FF\n")
    assert load_ihex(path).read(0x10010, 4) == b"\x01\x02\x03\x04"


def test_srec_round_trip(tmp_path: Path, calltest_chunks: list[tuple[int, bytes]]) -> None:
    path = tmp_path / "calltest.srec"
    path.write_text(srec_text(calltest_chunks))
    for image in (load_srec(path), load_image_spec(str(path))):
        assert [(r.start, bytes(r.data)) for r in image.regions] == calltest_chunks


def test_srec_s1_and_s2_records(tmp_path: Path) -> None:
    path = tmp_path / "small.s19"
    path.write_text("S1070100DEADBEEFBF\nS20802000001020304EB\nS9030000FC\n")
    image = load_srec(path)
    assert image.read(0x100, 4) == bytes.fromhex("deadbeef")
    assert image.read(0x20000, 4) == bytes.fromhex("01020304")


def corrupt_line(text: str, number: int, edit) -> str:
    lines = text.splitlines()
    lines[number - 1] = edit(lines[number - 1])
    return "\n".join(lines) + "\n"


def flip_last_digit(line: str) -> str:
    return line[:-1] + ("0" if line[-1] != "0" else "1")


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (flip_last_digit, 3, r":3: bad checksum"),
        (lambda line: line[:-2], 2, r":2: record length"),
        (lambda line: line[:9] + "ZZ" + line[11:], 2, r":2: .*not hex digits"),
        (lambda line: line[:-1], 2, r":2: odd number"),
        (lambda line: "x" + line, 4, r":4: expected an Intel HEX record"),
        (lambda line: line[:7] + "06" + line[9:], 2, r":2: (bad checksum|unknown)"),
    ],
)
def test_ihex_errors_name_the_line(
    tmp_path: Path, calltest_chunks: list[tuple[int, bytes]], edit, line: int, message: str
) -> None:
    path = tmp_path / "bad.hex"
    path.write_text(corrupt_line(ihex_text(calltest_chunks), line, edit))
    with pytest.raises(ImageError, match=rf"bad\.hex{message}"):
        load_ihex(path)


def test_ihex_unknown_record_type(tmp_path: Path) -> None:
    path = tmp_path / "type.hex"
    path.write_text(":0000000AF6\n:00000001FF\n")
    with pytest.raises(ImageError, match=r"type\.hex:1: unknown Intel HEX record type 0x0a"):
        load_ihex(path)


def test_ihex_missing_eof_and_trailing_records(
    tmp_path: Path, calltest_chunks: list[tuple[int, bytes]]
) -> None:
    text = ihex_text(calltest_chunks)
    path = tmp_path / "cut.hex"
    path.write_text("\n".join(text.splitlines()[:-1]) + "\n")
    with pytest.raises(ImageError, match=r"cut\.hex: no end-of-file record"):
        load_ihex(path)
    path.write_text(text + text.splitlines()[1] + "\n")
    with pytest.raises(ImageError, match=r"cut\.hex:\d+: record after the end-of-file"):
        load_ihex(path)


def test_ihex_overlapping_records_name_both_lines(tmp_path: Path) -> None:
    text = ihex_text([(0x1000, bytes(range(32)))]) + ""
    lines = text.splitlines()
    lines.insert(-1, ihex_text([(0x1018, b"\xff" * 4)]).splitlines()[1])
    path = tmp_path / "overlap.hex"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ImageError, match=r"overlap\.hex:4: data at 0x1018 .* from line 3"):
        load_ihex(path)


@pytest.mark.parametrize(
    ("edit", "line", "message"),
    [
        (flip_last_digit, 2, r":2: bad checksum"),
        (lambda line: line[:-4] + line[-2:], 3, r":3: record length"),
        (lambda line: "S4" + line[2:], 2, r":2: expected an S-record"),
        (lambda line: line[:10] + "GG" + line[12:], 2, r":2: .*not hex digits"),
    ],
)
def test_srec_errors_name_the_line(
    tmp_path: Path, calltest_chunks: list[tuple[int, bytes]], edit, line: int, message: str
) -> None:
    path = tmp_path / "bad.srec"
    path.write_text(corrupt_line(srec_text(calltest_chunks), line, edit))
    with pytest.raises(ImageError, match=rf"bad\.srec{message}"):
        load_srec(path)


def test_srec_count_and_termination(tmp_path: Path, calltest_chunks: list[tuple[int, bytes]]) -> None:
    lines = srec_text(calltest_chunks).splitlines()
    path = tmp_path / "count.srec"
    path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ImageError, match=r"count\.srec: no termination record"):
        load_srec(path)
    path.write_text("\n".join([*lines[:2], *lines[-2:]]) + "\n")
    with pytest.raises(ImageError, match=r"count\.srec:3: S5 says \d+ data records, .* has 1"):
        load_srec(path)


def test_non_ascii_text_image(tmp_path: Path) -> None:
    path = tmp_path / "latin.hex"
    path.write_bytes(b":00000001FF\n\xe9\n")
    with pytest.raises(ImageError, match=r"latin\.hex:2: not ASCII"):
        load_ihex(path)


def test_raw_binary_at_address(tmp_path: Path) -> None:
    ((start, code),) = segment_bytes(QUICKSORT)
    path = tmp_path / "quicksort.bin"
    path.write_bytes(code)
    image = load_image_spec(f"{path}@0x{start:x}")
    assert image.read(start, len(code)) == code
    assert load_raw(path, 32768).read(0x8000, 4) == code[:4]
    with pytest.raises(ImageError, match=r"quicksort\.bin: .*raw binary.*@0xADDRESS"):
        load_image_spec(str(path))


def test_empty_raw_binary(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.write_bytes(b"")
    assert load_raw(path, 0x1000).regions == ()


def test_image_spec_parsing() -> None:
    assert parse_image_spec("a.bin@0x8000") == (Path("a.bin"), 0x8000)
    assert parse_image_spec("a.bin@4096") == (Path("a.bin"), 4096)
    assert parse_image_spec("dir@v2/a.elf") == (Path("dir@v2/a.elf"), None)
    assert parse_image_spec("me@host.elf") == (Path("me@host.elf"), None)
    assert parse_image_spec("a.elf") == (Path("a.elf"), None)


def test_image_spec_elf_with_offset() -> None:
    image = load_image_spec(f"{QUICKSORT}@0x100000")
    assert image.regions[0].start == 0x108000
    assert image.symbols.lookup(0x108038) == ("quicksort", 0)


# --- CoreSight snapshot dumps ----------------------------------------------------------------


def test_snapshot_dump_sections(tmp_path: Path) -> None:
    (tmp_path / "low.bin").write_bytes(bytes(range(256)))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "high.bin").write_bytes(b"\xaa" * 64)
    ini = tmp_path / "cpu_0.ini"
    ini.write_text(
        "[device]\nname=cpu_0\nclass=core\n\n[regs]\nR15=0x1000\n\n"
        "[dump]\nfile=low.bin\naddress=0x1000\nlength=0x10\noffset=0x20\n\n"
        "; a second section of the same name\n"
        "[dump]\nfile=sub/high.bin\naddress=0x80000000\n\n"
        "[dump2]\nfile=low.bin\naddress=4096\nlength=0\n"
    )
    entries = read_dump_entries(ini)
    assert entries == [
        DumpEntry("low.bin", 0x1000, 0x10, 0x20, 8),
        DumpEntry("sub/high.bin", 0x80000000, None, 0, 15),
        DumpEntry("low.bin", 0x1000, 0, 0, 19),
    ]
    image = load_snapshot_dumps(ini, entries)
    assert image.read(0x1000, 0x10) == bytes(range(0x20, 0x30))
    assert image.read(0x80000000, 64) == b"\xaa" * 64
    assert not image.contains(0x1010)
    assert load_snapshot_device(ini).read(0x1004, 2) == b"\x24\x25"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[dump]\nfile=low.bin\naddress=zero\n", r"cpu\.ini:3: expected address= an address from 0 to "
         r"0xffffffffffffffff, got 'zero'"),
        ("[dump]\nfile=low.bin\naddress=0x10000000000000000\n", r"cpu\.ini:3: expected address= an address"),
        ("[dump]\nfile=low.bin\naddress=0\nlength=-5\n", r"cpu\.ini:4: expected length= a byte count from 0 "
         r"to 0x10000000000000000, got '-5'"),
        ("[dump]\nfile=low.bin\naddress=0\noffset=-4\n", r"cpu\.ini:4: expected offset= a file offset from 0 "
         r"to 0x7fffffffffffffff, got '-4'"),
        ("[dump]\nfile=low.bin\naddress=0\noffset=1" + "0" * 5000 + "\n", r"cpu\.ini:4: expected offset="),
        ("[dump]\nfile=low.bin\naddress=0xfffffffffffffff0\nlength=0x20\n",
         r"cpu\.ini:4: expected length= at most 0x10 \(a dump ends by address 2\*\*64\), got '0x20'"),
        ("[dump]\nfile=low.bin\naddress=0xffffffffffffff00\noffset=0x10\nlength=0x100\n",
         r"cpu\.ini:1: dump of low\.bin at 0xffffffffffffff00: .*asked for 0x100 bytes at file offset 0x10"),
        ("[dump]\nfile=low.bin\naddress=0xffffffffffffff10\n",
         r"cpu\.ini:1: dump of low\.bin at 0xffffffffffffff10: its 0x100 bytes end past address 0x1"),
        ("[dump]\nfile=low\0.bin\naddress=0\n", r"cpu\.ini:2: expected text, got a NUL byte"),
        ("[dump]\nfile=" + "x" * 5000 + "\naddress=0\n", r"cpu\.ini:1: dump of x+ at 0x0: .*: cannot read"),
        ("[dump]\nfile=/\naddress=0\n", r"cpu\.ini:1: dump of / at 0x0: /: cannot read"),
        ("[dump]\nfile=low.bin\n", r"cpu\.ini:1: \[dump\] needs both file= and address="),
        ("[dump]\nnonsense line\n", r"cpu\.ini:2: expected \[section\] or key=value"),
        ("[dump]\nfile=gone.bin\naddress=0\n", r"cpu\.ini:1: dump of gone\.bin at 0x0: .*gone\.bin: cannot "),
        (
            "[dump]\nfile=low.bin\naddress=0x10\nlength=0x200\n",
            r"cpu\.ini:1: dump of low\.bin at 0x10: .*low\.bin: asked for 0x200 bytes .* has 0x100 bytes",
        ),
    ],
)
def test_snapshot_errors(tmp_path: Path, body: str, message: str) -> None:
    """Each a clear ImageError naming the device file, the line and what was expected (a negative
    length or offset, an address over 64 bits and a NUL byte were accepted or crashed before)."""
    (tmp_path / "low.bin").write_bytes(bytes(256))
    ini = tmp_path / "cpu.ini"
    ini.write_text(body)
    with pytest.raises(ImageError, match=message):
        load_snapshot_device(ini)


COMPRESSORS = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress, ".zst": zstandard.compress}


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_a_dump_shipped_compressed_is_read_decompressed(tmp_path: Path, suffix: str) -> None:
    """A dump file that is only there as NAME.xz (.gz, .bz2, .zst) gives the bytes NAME would."""
    content = bytes(range(256)) * 3
    (tmp_path / ("low.bin" + suffix)).write_bytes(COMPRESSORS[suffix](content))
    ini = tmp_path / "cpu_0.ini"
    ini.write_text(
        "[dump]\nfile=low.bin\naddress=0x1000\nlength=0x10\noffset=0x120\n"
        "[dump]\nfile=low.bin\naddress=0x8000\n"
    )
    image = load_snapshot_device(ini)
    assert image.read(0x1000, 0x10) == content[0x120:0x130]
    assert image.read(0x8000, len(content)) == content
    assert not image.contains(0x8000 + len(content))


def test_a_dump_file_itself_is_read_before_a_compressed_copy(tmp_path: Path) -> None:
    (tmp_path / "low.bin").write_bytes(b"\x11" * 16)
    (tmp_path / "low.bin.xz").write_bytes(lzma.compress(b"\x22" * 16))
    ini = tmp_path / "cpu.ini"
    ini.write_text("[dump]\nfile=low.bin\naddress=0\n")
    assert load_snapshot_device(ini).read(0, 16) == b"\x11" * 16


@pytest.mark.parametrize(
    ("packed", "length", "message"),
    [
        (lzma.compress(bytes(256)), 0x200, r"low\.bin\.xz: asked for 0x200 bytes .* has 0x100 bytes"),
        (lzma.compress(bytes(range(256)))[:100], 0x100, r"low\.bin\.xz:0: expected a readable compressed"),
        (b"not compressed at all", 0x10, r"low\.bin\.xz: expected a gzip, zstd, xz or bzip2 file"),
    ],
    ids=["short", "truncated", "not-compressed"],
)
def test_bad_compressed_dumps_are_errors(tmp_path: Path, packed: bytes, length: int, message: str) -> None:
    (tmp_path / "low.bin.xz").write_bytes(packed)
    ini = tmp_path / "cpu.ini"
    ini.write_text(f"[dump]\nfile=low.bin\naddress=0x10\nlength={length}\n")
    with pytest.raises(ImageError, match=r"cpu\.ini:1: dump of low\.bin at 0x10: .*" + message):
        load_snapshot_device(ini)


def test_real_tc2_snapshot_device() -> None:
    ini = shared("tc2-etmv3", "cpu_0.ini")
    entries = read_dump_entries(ini)
    assert entries == [DumpEntry("kernel_dump.bin", 0xC0008000, 0x50000, 0, 11)]
    image = load_snapshot_dumps(ini, entries)
    assert image.regions[0].end == 0xC0058000
    assert image.read(0xC002115C, 2) == bytes.fromhex("6369")  # LDR r3,[r4,#0x14] = 0x6963
