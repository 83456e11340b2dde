"""ETMv3 data trace: runs recorded from the corpus programs (full Tarmac with every memory
access), encoded with their loads and stores as data packets by the test encoder, decoded,
and the `memory` table compared with the recording: values and addresses, address-only and
value-only, LDM/STM/PUSH/POP with the address on the first transfer only, value-not-traced
placeholders, out-of-order values (in any later packet batch), partially traced LSMs, and
data packets that belong to no load/store."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from etm_encoder import FILTERED, NOT_TRACED, TRACED, EtmEncoder, Step, Transfer, encode_run, format_frames
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_etmv3_decode import recorded as recorded_steps
from test_etmv3_decode import well_formed

import cputrace
from cputrace.errors import CputraceError
from cputrace.flow.program import Program
from cputrace.formats.base import DecodeContext
from cputrace.formats.coresight import capture
from cputrace.formats.coresight.capture import EtmSource, open_captures
from cputrace.formats.coresight.decoder import decode_captures
from cputrace.formats.etmv3.config import EtmConfig
from cputrace.formats.etmv3.instructions import Etmv3SourceWalk
from cputrace.formats.etmv3.packets import Packets, decode_packets
from cputrace.formats.etmv3.protocol import Kind
from cputrace.image import load_elf, load_raw
from cputrace.ingest import ingest
from cputrace.isa import BlockCache
from cputrace.model import Isa

CORPUS = Path(__file__).parent / "corpus"


def recorded(program: str, tmp_path: Path) -> tuple[list[Step], dict[int, list[Transfer]]]:
    """The run of a corpus program as steps (with its exceptions), and the transfers of each
    load/store step (a table branch's read is no data transfer for the ETM)."""
    steps = recorded_steps(program, tmp_path)
    blocks = blocks_of(program)
    t = cputrace.Trace(tmp_path / "run.ctrace")
    memory: dict[int, list[Transfer]] = {}
    for m in t.sql("SELECT seq, op, addr, size, value FROM memory ORDER BY seq").to_pylist():
        info = blocks.insn_at(steps[m["seq"]].pc, Isa[steps[m["seq"]].isa])
        if info.is_load or info.is_store:
            memory.setdefault(m["seq"], []).append(Transfer(m["op"], m["addr"], m["size"], m["value"]))
    return steps, memory


def decoded_memory(
    enc: EtmEncoder, program: str, tmp_path: Path, strict: bool = True
) -> tuple[list[tuple], list[dict]]:
    """The memory rows (seq, op, addr, size, value) and events of the decoded stream."""
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    opts = options(enc)
    result = ingest([stream], tmp_path / "etm.ctrace", format="coresight", strict=strict, options=opts,
                    images=[CORPUS / program])  # fmt: skip
    t = cputrace.Trace(result.store)
    rows = t.sql("SELECT seq, op, addr, size, value FROM memory ORDER BY seq, src").to_pylist()
    events = t.sql("SELECT kind, name, seq FROM events ORDER BY seq, src").to_pylist()
    return [tuple(r.values()) for r in rows], events


def options(enc: EtmEncoder) -> dict:
    """ETMCR for what `enc` produces: bit 2 data values, bit 3 data addresses."""
    etmcr = (enc.cycle_accurate << 12) | (enc.data_value << 2) | (enc.data_address << 3)
    return {"etmcr": etmcr, "etmidr": 0x4100F250, "buffer_format": "source_data"}


def blocks_of(program: str) -> BlockCache:
    return BlockCache(load_elf(CORPUS / program))


def in_order(rows: list[tuple]) -> list[tuple]:
    """Rows by seq then address: the recording lists a PUSH's transfers highest first."""
    return sorted(rows, key=lambda r: (r[0], r[2] if r[2] is not None else 0))


@pytest.mark.parametrize("program", ["calls-a32.elf", "calls-t32.elf", "exceptions-a32.elf"])
@pytest.mark.parametrize(
    "mode",
    [
        {"data_address": True, "data_value": True, "cycle_accurate": True},
        {"data_address": True, "data_value": True},
        {"data_address": True},
        {"data_value": True},
    ],
)
def test_encoded_loads_and_stores_decode_to_the_recorded_memory(
    program: str, mode: dict, tmp_path: Path
) -> None:
    steps, memory = recorded(program, tmp_path)
    enc = EtmEncoder(**mode).a_sync()
    expected = encode_run(enc, steps, blocks_of(program), rng=random.Random(3), memory=memory)
    got, events = decoded_memory(enc, program, tmp_path)
    assert in_order(got) == in_order(expected.memory)
    assert not [e for e in events if e["name"] == "unexpected_data"]
    recorded_rows = sorted((s, t.op, t.addr, t.size, t.value) for s, ts in memory.items() for t in ts)
    if mode.get("data_address") and mode.get("data_value"):  # everything the recording has
        assert sorted(got) == recorded_rows
    multiple = [s for s, ts in memory.items() if len(ts) > 2]
    assert multiple, "the run has load/store-multiple instructions"


def decode_in_batches(
    enc: EtmEncoder, program: str, size: int, max_wait: int | None = None
) -> tuple[pa.Table, pa.Table]:
    """The memory and events tables of `enc`'s stream decoded `size` packets at a time
    (`max_wait`: the rows an out-of-order placeholder may hold back)."""
    opts = options(enc)
    config = EtmConfig(etmcr=opts["etmcr"], etmidr=opts["etmidr"])
    packets = decode_packets(enc.data, config)
    walk = Etmv3SourceWalk(EtmSource(config, None, 0, "-"), Program(load_elf(CORPUS / program)))
    if max_wait is not None:
        walk.data.max_wait = max_wait
    batches = []
    for start in range(0, len(packets), size):
        part = Packets(packets.table[start : start + size], packets.stream, packets.stream_pos)
        batches += walk.batch(part)
    batches += walk.finish()
    memory = pa.concat_tables([b["memory"] for b in batches if "memory" in b])
    return memory, pa.concat_tables([b["events"] for b in batches if "events" in b])


def test_packet_batches_of_any_size_give_the_same_memory(tmp_path: Path) -> None:
    """Packets wait across batches for the instruction rows the walker holds back."""
    steps, memory = recorded("calls-a32.elf", tmp_path)
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    expected = encode_run(enc, steps[:3000], blocks_of("calls-a32.elf"), memory=memory)
    for size in (1, 7, 64):
        got = decode_in_batches(enc, "calls-a32.elf", size)[0].select(["seq", "op", "addr", "size", "value"])
        assert in_order([tuple(r.values()) for r in got.to_pylist()]) == in_order(expected.memory)


def test_an_lsm_sends_its_address_once(tmp_path: Path) -> None:
    """Sequential LSM transfers carry no address: the stream is shorter than with one each."""
    steps, memory = recorded("calls-a32.elf", tmp_path)
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    encode_run(enc, steps, blocks_of("calls-a32.elf"), memory=memory)
    addresses = sum(1 for b in enc.data if b & 0xF3 == 0x22)  # normal data headers with A set
    transfers = sum(len(ts) for ts in memory.values())
    assert addresses < transfers  # the header count is an upper bound (value bytes can look alike)


def test_value_not_traced_and_partially_traced_lsms(tmp_path: Path) -> None:
    """Every third transfer's value is not traced; LSMs are traced from their second transfer."""
    steps, memory = recorded("calls-t32.elf", tmp_path)

    def choice(i: int, k: int) -> str:
        if len(memory[i]) > 2 and k == 0:
            return FILTERED
        return NOT_TRACED if (i + k) % 3 == 0 else TRACED

    for mode in ({"data_address": True, "data_value": True}, {"data_value": True}):
        enc = EtmEncoder(**mode).a_sync()
        expected = encode_run(enc, steps, blocks_of("calls-t32.elf"), memory=memory, data=choice)
        got, events = decoded_memory(enc, "calls-t32.elf", tmp_path)
        assert in_order(got) == in_order(expected.memory)
        assert any(r[4] is None for r in got) and any(r[4] is not None for r in got)
        assert not [e for e in events if e["name"] == "unexpected_data"]


def test_a_data_packet_without_a_load_store_is_reported_not_matched(tmp_path: Path) -> None:
    """A data packet before any load/store, and one past an instruction's transfers."""
    steps, memory = recorded("calls-a32.elf", tmp_path)
    blocks = blocks_of("calls-a32.elf")
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    enc.i_sync(steps[0].pc, steps[0].isa, 1).normal_data(0x1234, 2, 0x9000)
    first = next(i for i in sorted(memory) if len(memory[i]) == 1 and steps[i].executed)
    expected = encode_run(enc, steps[: first + 1], blocks, memory=memory)
    enc.normal_data(0x55, 1)  # a second transfer for a single load/store
    got, events = decoded_memory(enc, "calls-a32.elf", tmp_path)
    assert got == expected.memory
    unexpected = [e for e in events if e["name"] == "unexpected_data"]
    assert [e["kind"] for e in unexpected] == ["trace_gap", "trace_gap"]
    assert unexpected[-1]["seq"] == first


def test_out_of_order_values_fill_their_placeholder(tmp_path: Path) -> None:
    steps, memory = recorded("calls-a32.elf", tmp_path)
    load = next(i for i in sorted(memory) if len(memory[i]) == 1 and memory[i][0].op == "R")
    t = memory[load][0]
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    encode_run(enc, steps[: load + 1], blocks_of("calls-a32.elf"))
    enc.ooo_placeholder(2, t.addr).ooo_data(2, t.value, 4).ooo_data(1, 7, 1)  # tag 1 has no placeholder
    got, events = decoded_memory(enc, "calls-a32.elf", tmp_path)
    assert got == [(load, "R", t.addr, t.size, t.value)]
    assert [e["seq"] for e in events if e["name"] == "unexpected_data"] == [load]


@dataclass
class OutOfOrderEncoder(EtmEncoder):
    """Sends the n-th normal data packet out of order when `late(n)` says: a placeholder in
    its place and its value after that many more P-headers (None: the value never comes).
    Like an ETM, it does not reuse a tag whose value is still to come (it sends that first)."""

    late: Callable[[int], int | bool | None] = lambda n: False
    sent: int = 0
    due: list[list[int]] = field(default_factory=list)  # [P-headers to wait, tag, value, size]
    lost: list[int] = field(default_factory=list)  # n of the values never sent

    def normal_data(
        self, value: int = 0, size: int = 4, address: int | None = None, big_endian: bool | None = None
    ) -> EtmEncoder:
        n, self.sent = self.sent, self.sent + 1
        wait = self.late(n)
        if wait is False:
            return super().normal_data(value, size, address, big_endian)
        busy = [tag for _, tag, _, _ in self.due]
        tag = next((t for t in (1, 2, 3) if t not in busy), None)
        if tag is None:  # every tag waits for its value: send the oldest now
            tag = self.due[0][1]
            self.send(self.due.pop(0))
        if wait is None:
            self.lost.append(n)
        else:
            self.due.append([wait, tag, value, size])
        return self.ooo_placeholder(tag, address)

    def atoms(self, pattern: str) -> EtmEncoder:
        super().atoms(pattern)
        if pattern:
            for entry in self.due:
                entry[0] -= 1
            for entry in [e for e in self.due if e[0] <= 0]:
                self.due.remove(entry)
                self.send(entry)
        return self

    def send(self, entry: list[int]) -> None:
        _, tag, value, size = entry
        self.ooo_data(tag, value, size)

    def send_all(self) -> None:
        while self.due:
            self.send(self.due.pop(0))


class Run:
    """A recorded run of calls-a32.elf: its steps and the transfers of its loads/stores."""

    def __init__(self, tmp_path: Path) -> None:
        self.steps, self.memory = recorded("calls-a32.elf", tmp_path)

    def __repr__(self) -> str:
        return "Run(calls-a32.elf)"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run(tmp_path_factory.mktemp("run"))


def encode_out_of_order(
    steps: list[Step], memory: dict[int, list[Transfer]], late: Callable[[int], int | bool | None]
) -> tuple[OutOfOrderEncoder, list[tuple]]:
    """A run with its values sent out of order as `late` says, and the memory rows expected
    (values that never come are null)."""
    enc = OutOfOrderEncoder(data_address=True, data_value=True, late=late)
    enc.a_sync()
    expected = encode_run(enc, steps, blocks_of("calls-a32.elf"), memory=memory).memory
    enc.send_all()
    for n in enc.lost:
        expected[n] = (*expected[n][:4], None)
    return enc, expected


def memory_rows(table: pa.Table) -> list[tuple]:
    return [tuple(r.values()) for r in table.select(["seq", "op", "addr", "size", "value"]).to_pylist()]


def test_out_of_order_values_fill_placeholders_of_earlier_batches(run: Run) -> None:
    """Every third value comes one to four P-headers after its placeholder, so in a later
    batch when batches are small: each fills its placeholder, rows stay in seq order."""
    steps, memory = run.steps, run.memory
    enc, expected = encode_out_of_order(steps[:3000], memory, lambda n: n % 4 + 1 if n % 3 == 0 else False)
    recorded_rows = [(s, t.op, t.addr, t.size, t.value) for s, ts in memory.items() if s < 3000 for t in ts]
    assert in_order(expected) == in_order(recorded_rows) and enc.sent > 100
    for size in (1, 7, 64, 1 << 16):
        got, events = decode_in_batches(enc, "calls-a32.elf", size)
        rows = memory_rows(got)
        assert [r[0] for r in rows] == sorted(r[0] for r in rows)
        assert in_order(rows) == in_order(recorded_rows)
        assert "unexpected_data" not in events.column("name").to_pylist()


def test_a_placeholder_whose_value_never_comes_stays_null(run: Run, tmp_path: Path) -> None:
    """Lost values, the last one's placeholder the stream's last data packet: the tag's next
    placeholder, or the end of the stream, lets the rows held behind them go, value null."""
    steps, memory = run.steps[:2000], run.memory
    count = encode_out_of_order(steps, memory, lambda n: False)[0].sent
    never = {5, 40, 41, count - 1}
    enc, expected = encode_out_of_order(steps, memory, lambda n: None if n in never else n % 5 == 0 and 2)
    assert sorted(enc.lost) == sorted(never) and enc.sent == count
    for size in (1, 1 << 16):
        got, events = decode_in_batches(enc, "calls-a32.elf", size)
        assert in_order(memory_rows(got)) == in_order(expected)
        assert "unexpected_data" not in events.column("name").to_pylist()
    got, _ = decoded_memory(enc, "calls-a32.elf", tmp_path)
    assert in_order(got) == in_order(expected)


def test_an_out_of_order_value_after_a_trace_gap_fills_nothing(run: Run) -> None:
    """Past a trace-on I-sync the placeholder waits no more: its value is unexpected data."""
    steps, memory = run.steps, run.memory
    blocks = blocks_of("calls-a32.elf")
    load = next(i for i in sorted(memory) if len(memory[i]) == 1 and memory[i][0].op == "R")
    t = memory[load][0]
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    others = {i: ts for i, ts in memory.items() if i != load}
    expected = encode_run(enc, steps[: load + 1], blocks, memory=others).memory
    enc.ooo_placeholder(1, t.addr)
    encode_run(enc, steps[load + 1 : load + 40], blocks)  # starts with a trace-on I-sync
    enc.ooo_data(1, t.value, 4)
    for size in (1, 1 << 16):
        got, events = decode_in_batches(enc, "calls-a32.elf", size)
        assert memory_rows(got) == [*expected, (load, "R", t.addr, t.size, None)]
        assert events.column("name").to_pylist().count("unexpected_data") == 1


def test_a_placeholder_holds_back_a_bounded_number_of_rows(run: Run) -> None:
    """A value that comes more than `max_wait` rows after its placeholder fills nothing."""
    steps, memory = run.steps[:1000], run.memory
    enc, expected = encode_out_of_order(steps, memory, lambda n: 30 if n == 3 else False)
    assert in_order(memory_rows(decode_in_batches(enc, "calls-a32.elf", 5)[0])) == in_order(expected)
    got, events = decode_in_batches(enc, "calls-a32.elf", 5, max_wait=4)
    assert in_order(memory_rows(got)) == in_order([*expected[:3], (*expected[3][:4], None), *expected[4:]])
    assert events.column("name").to_pylist().count("unexpected_data") == 1


@settings(max_examples=25, deadline=None)
@given(
    late=st.lists(st.one_of(st.just(False), st.none(), st.integers(0, 6)), min_size=1, max_size=40),
    sizes=st.lists(st.integers(1, 300), min_size=2, max_size=2),
)
def test_batch_sizes_do_not_change_the_memory_rows(run: Run, late: list, sizes: list[int]) -> None:
    """Out-of-order values (some never sent), decoded in batches of any two sizes: the same rows."""
    enc, _ = encode_out_of_order(run.steps[:800], run.memory, lambda n: late[n % len(late)])
    first, second = (decode_in_batches(enc, "calls-a32.elf", size) for size in sizes)
    assert first[0].to_pylist() == second[0].to_pylist()
    assert first[1].to_pylist() == second[1].to_pylist()


def test_data_after_a_trace_gap_waits_for_the_next_i_sync(tmp_path: Path) -> None:
    steps, memory = recorded("calls-a32.elf", tmp_path)
    blocks = blocks_of("calls-a32.elf")
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    first = encode_run(enc, steps[:200], blocks, memory=memory)
    enc.raw(b"\x3a").a_sync().normal_data(1, 1, 0x100)  # a reserved header, then a stray data packet
    got, events = decoded_memory(enc, "calls-a32.elf", tmp_path, strict=False)
    assert in_order(got) == in_order(first.memory)
    assert [e["name"] for e in events if e["kind"] == "trace_gap"] == ["error", "unexpected_data"]


def test_a_failed_store_exclusive_keeps_its_address_not_its_value(tmp_path: Path) -> None:
    """A store-failed packet right after a store's data packet: no value was written."""
    steps, memory = recorded("calls-a32.elf", tmp_path)
    store = next(i for i in sorted(memory) if len(memory[i]) == 1 and memory[i][0].op == "W")
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    expected = encode_run(enc, steps[: store + 1], blocks_of("calls-a32.elf"), memory=memory)
    enc.store_failed()
    got, _ = decoded_memory(enc, "calls-a32.elf", tmp_path)
    t = cputrace.Trace(tmp_path / "etm.ctrace")
    assert got[:-1] == expected.memory[:-1]
    assert got[-1] == (*expected.memory[-1][:4], None)
    assert t.sql("SELECT attrs FROM memory WHERE seq = ?", [store]).to_pylist() == [{"attrs": "X FAILED"}]
    assert t.sql("SELECT count(*) AS n FROM memory WHERE attrs IS NOT NULL").to_pylist() == [{"n": 1}]


def test_data_suppression_loses_the_transfers_of_the_load_store_in_progress(tmp_path: Path) -> None:
    steps, memory = recorded("calls-a32.elf", tmp_path)
    lsm = next(i for i in sorted(memory) if len(memory[i]) > 2 and steps[i].executed)
    enc = EtmEncoder(data_address=True, data_value=True).a_sync()
    untraced = {i: ts for i, ts in memory.items() if i != lsm}
    expected = encode_run(enc, steps[: lsm + 1], blocks_of("calls-a32.elf"), memory=untraced)
    first = memory[lsm][0]
    enc.data_suppressed().normal_data(first.value, 4, first.addr)  # this LSM's: which transfer is lost
    got, events = decoded_memory(enc, "calls-a32.elf", tmp_path)
    assert in_order(got) == in_order(expected.memory)
    gaps = [(e["name"], e["seq"]) for e in events if e["kind"] == "trace_gap"]
    assert gaps == [("data_suppressed", lsm), ("unexpected_data", lsm)]


def test_memory_rows_take_the_time_of_their_instruction(tmp_path: Path) -> None:
    steps, memory = recorded("calls-t32.elf", tmp_path)
    enc = EtmEncoder(data_address=True, data_value=True, cycle_accurate=True).a_sync()
    encode_run(enc, steps, blocks_of("calls-t32.elf"), memory=memory, timestamp_every=40)
    decoded_memory(enc, "calls-t32.elf", tmp_path)
    t = cputrace.Trace(tmp_path / "etm.ctrace")
    timed = t.sql("SELECT count(*) AS n FROM memory WHERE time IS NOT NULL").to_pylist()[0]["n"]
    differ = t.sql(
        "SELECT count(*) AS n FROM memory m JOIN instructions i USING (seq) "
        "WHERE m.time IS DISTINCT FROM i.time"
    ).to_pylist()[0]["n"]
    assert timed > 100 and differ == 0


def test_a_data_only_trace_gives_its_transfers_without_instructions(tmp_path: Path) -> None:
    """ETMCR bit 20: no instructions and no image; each transfer a row in trace order, the
    ones without an address 4 bytes on from the one before, direction and size unknown."""
    enc = EtmEncoder(data_address=True, data_value=True, data_only=True).a_sync().i_sync(0, "A32", 1)
    enc.normal_data(0x1234, 2, 0x8000).normal_data(0x55, 1).value_not_traced()
    enc.normal_data(0x66, 1, 0x9000).store_failed().data_suppressed().normal_data(7, 1)
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    etmcr = (1 << 20) | (1 << 3) | (1 << 2)
    options = {"etmcr": etmcr, "buffer_format": "source_data"}
    result = ingest([stream], tmp_path / "d.ctrace", format="coresight", strict=True, options=options)
    t = cputrace.Trace(result.store)
    rows = t.sql("SELECT seq, op, size, addr, value, attrs FROM memory ORDER BY src").to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        (0, None, None, 0x8000, 0x1234, None), (0, None, None, 0x8004, 0x55, None),
        (0, None, None, 0x8008, None, None), (0, None, None, 0x9000, None, "X FAILED"),
        (0, None, None, None, 7, None),
    ]
    assert t.manifest["counts"]["instructions"] == 0
    gaps = t.sql("SELECT name FROM events WHERE kind = 'trace_gap'").column("name").to_pylist()
    assert gaps == ["data_suppressed"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=200))
def test_any_bytes_with_data_trace_decode_or_fail_cleanly(data: bytes, tmp_path: Path) -> None:
    """Well-formed tables (see `well_formed`), at most a memory row per data packet that can
    be one, each at an executed load or store; a warning per packet error."""
    enc = EtmEncoder(data_address=True, data_value=True).a_sync().i_sync(0x8000, "A32", 1)
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data + bytes([0x82]) + data)
    opts = options(enc)
    packets = decode_packets(enc.data + bytes([0x82]) + data, EtmConfig(opts["etmcr"], opts["etmidr"]))
    ctx = DecodeContext(options=opts, image=load_elf(CORPUS / "calls-a32.elf"))
    tables = well_formed(list(decode_captures(open_captures(stream, opts), ctx)), packets)
    rows = np.isin(packets["kind"], [Kind.NORMAL_DATA, Kind.OOO_PLACEHOLDER, Kind.VALUE_NOT_TRACED])
    assert tables["memory"].num_rows <= np.count_nonzero(rows)
    loads_stores = set(tables["instructions"].filter(tables["instructions"]["executed"])["seq"].to_pylist())
    assert set(tables["memory"]["seq"].to_pylist()) <= loads_stores
    assert ctx.warnings == np.count_nonzero(packets["kind"] == Kind.ERROR)


def test_a_malformed_packet_in_a_data_only_trace_is_a_gap(tmp_path: Path) -> None:
    """An I-sync carrying an instruction address in data-only mode (where I-syncs have none):
    its address bytes read as packets, here zeros that are no A-sync. As in instruction mode,
    that is a warning (an error with --strict) and a trace_gap event; the data after the next
    A-sync and I-sync is decoded again."""
    enc = EtmEncoder(data_address=True, data_value=True, data_only=True).a_sync()
    enc.raw(bytes([0x08, 0x20]) + (0x8000).to_bytes(4, "little"))  # header, info (trace on), address
    enc.normal_data(0x1234, 4, 0x9000)
    enc.data_address_sent = 0  # the decoder never saw 0x9000: compress against nothing
    enc.a_sync().i_sync(0, "A32", 1).normal_data(0x55, 4, 0x9004)
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    opts = {"etmcr": (1 << 20) | (1 << 3) | (1 << 2), "buffer_format": "source_data"}
    result = ingest([stream], tmp_path / "d.ctrace", format="coresight", options=opts)
    t = cputrace.Trace(result.store)
    gaps = t.sql("SELECT name, src FROM events WHERE kind = 'trace_gap'").to_pylist()
    assert gaps == [{"name": "error", "src": 8}]  # the first zero byte after the info byte
    assert result.manifest["warnings"]["count"] == 1
    assert t.sql("SELECT addr, value FROM memory").to_pylist() == [{"addr": 0x9004, "value": 0x55}]
    with pytest.raises(CputraceError, match=r"etm\.bin:offset 0x8: expected an A-sync"):
        ingest([stream], tmp_path / "s.ctrace", format="coresight", strict=True, options=opts)


# --- swaps and exclusives, through a small image -------------------------------------------------

# A32 code at 0x8000: swp r0, r1, [r2]; swpb r0, r1, [r2]; ldrex r0, [r1]; strex r2, r0, [r1] (twice);
# nop; nop
EXCLUSIVES = (0xE1020091, 0xE1420091, 0xE1910F9F, 0xE1812F90, 0xE1812F90, 0xE320F000, 0xE320F000)


def decoded_image_memory(enc: EtmEncoder, tmp_path: Path, batch: int | None = None) -> list[tuple]:
    """(seq, op, addr, size, value, attrs) of `enc`'s stream walked through EXCLUSIVES, ingested
    whole, or decoded `batch` packets at a time."""
    code = tmp_path / "code.bin"
    code.write_bytes(b"".join(word.to_bytes(4, "little") for word in EXCLUSIVES))
    stream = tmp_path / "etm.bin"
    stream.write_bytes(enc.data)
    etmcr = (enc.data_value << 2) | (enc.data_address << 3)
    if batch is None:
        opts = {"etmcr": etmcr, "buffer_format": "source_data"}
        result = ingest([stream], tmp_path / "etm.ctrace", format="coresight", strict=True, options=opts,
                        images=[f"{code}@0x8000"])  # fmt: skip
        query = "SELECT seq, op, addr, size, value, attrs FROM memory ORDER BY seq, src"
        return [tuple(r.values()) for r in cputrace.Trace(result.store).sql(query).to_pylist()]
    config = EtmConfig(etmcr)
    packets = decode_packets(enc.data, config)
    walk = Etmv3SourceWalk(EtmSource(config, None, 0, "-"), Program(load_raw(code, 0x8000)))
    batches = []
    for start in range(0, len(packets), batch):
        part = Packets(packets.table[start : start + batch], packets.stream, packets.stream_pos)
        batches += walk.batch(part)
    batches += walk.finish()
    memory = pa.concat_tables([b["memory"] for b in batches if "memory" in b])
    columns = ["seq", "op", "addr", "size", "value", "attrs"]
    return [tuple(r.values()) for r in memory.select(columns).to_pylist()]


def exclusives_stream() -> EtmEncoder:
    enc = EtmEncoder(data_address=True, data_value=True).a_sync().i_sync(0x8000, "A32", 1)
    enc.atoms("E").normal_data(0xAA, 4, 0x9000)  # swp, a stores-only filter: its write alone
    enc.atoms("E").normal_data(0x11, 1, 0x9004).normal_data(0x22, 1, 0x9004)  # swpb: read, write
    enc.atoms("E").normal_data(0x33, 4, 0x9008)  # ldrex
    enc.atoms("E").normal_data(0x44, 4, 0x9008)  # strex
    enc.atoms("E").normal_data(0, 4, 0x9008).store_failed()  # strex, failed
    return enc.atoms("EE")


def test_swaps_and_exclusives(tmp_path: Path) -> None:
    """A swap traced in part is counted back from its last transfer (the write); exclusive
    loads and stores are marked `X`, a failed store exclusive `X FAILED` with no value."""
    want = [
        (0, "W", 0x9000, 4, 0xAA, None),
        (1, "R", 0x9004, 1, 0x11, None), (1, "W", 0x9004, 1, 0x22, None),
        (2, "R", 0x9008, 4, 0x33, "X"),
        (3, "W", 0x9008, 4, 0x44, "X"),
        (4, "W", 0x9008, 4, None, "X FAILED"),
    ]  # fmt: skip
    assert decoded_image_memory(exclusives_stream(), tmp_path) == want
    for size in (1, 2, 3):  # a swap's packet and the next load/store's in different batches
        assert decoded_image_memory(exclusives_stream(), tmp_path, size) == want


def test_a_swap_traced_at_the_end_of_the_stream_is_its_write(tmp_path: Path) -> None:
    enc = EtmEncoder(data_address=True, data_value=True).a_sync().i_sync(0x8000, "A32", 1)
    enc.atoms("E").normal_data(0xAA, 4, 0x9000)
    assert decoded_image_memory(enc, tmp_path) == [(0, "W", 0x9000, 4, 0xAA, None)]


@pytest.mark.parametrize("chunk", [None, 1000])
def test_two_sources_with_data_trace_keep_every_table_in_seq_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None
) -> None:
    """Two data-traced sources in one formatted buffer, their bytes interleaved in frames, one
    with a packet error and a stray data packet: every table is in seq order, and each source's
    rows are the ones it gives decoded alone (numbered on after the source before it). The
    buffer split once, or (chunk) read once per source in chunks, its trace IDs found first."""
    if chunk:
        monkeypatch.setattr(capture, "CHUNK_BYTES", chunk)
    steps, memory = recorded("calls-a32.elf", tmp_path)
    blocks = blocks_of("calls-a32.elf")
    first = EtmEncoder(data_address=True, data_value=True).a_sync()
    encode_run(first, steps[:1200], blocks, memory=memory)
    first.raw(b"\x3a").a_sync().normal_data(1, 1, 0x100)  # a reserved header, then a stray data packet
    encode_run(first, steps[:300], blocks, memory=memory)
    second = EtmEncoder(data_address=True, data_value=True).a_sync()
    encode_run(second, steps[:2000], blocks, memory=memory)
    rng = random.Random(5)
    chunks, at = [], {0x10: 0, 0x11: 0}
    while any(at[i] < len(enc.data) for i, enc in ((0x10, first), (0x11, second))):
        for trace_id, enc in ((0x10, first), (0x11, second)):
            size = rng.randrange(1, 300)
            chunks.append((trace_id, enc.data[at[trace_id] : at[trace_id] + size]))
            at[trace_id] += size
    buffer = tmp_path / "etb.bin"
    buffer.write_bytes(format_frames([(i, piece) for i, piece in chunks if piece]))
    opts = {**options(first), "buffer_format": "coresight"}
    etm = {"format": "coresight", "images": [CORPUS / "calls-a32.elf"]}
    both = cputrace.Trace(ingest([buffer], tmp_path / "both.ctrace", options=opts, **etm).store)
    for table in ("instructions", "memory", "events"):
        seq = both.sql(f"SELECT seq FROM {table}").column("seq").to_numpy()  # stored order
        assert np.all(np.diff(seq) >= 0), table
    queries = {
        "instructions": "SELECT seq, pc, executed FROM instructions WHERE cpu = ? ORDER BY seq",
        "memory": "SELECT seq, op, addr, value FROM memory WHERE cpu = ? ORDER BY seq, src",
        "events": "SELECT seq, kind, name, value, src FROM events WHERE cpu = ? ORDER BY seq, src",
    }
    for trace_id in (0x10, 0x11):
        one = {**opts, "source": trace_id}
        t = cputrace.Trace(ingest([buffer], tmp_path / f"s{trace_id}", options=one, **etm).store)
        start = both.sql("SELECT min(seq) FROM instructions WHERE cpu = ?", [trace_id]).column(0)[0].as_py()
        for table, query in queries.items():
            got = [(r["seq"] - start, *list(r.values())[1:]) for r in both.sql(query, [trace_id]).to_pylist()]
            assert got == [tuple(r.values()) for r in t.sql(query, [trace_id]).to_pylist()], table
        assert t.manifest["counts"]["memory"] > 500
    gaps = both.sql("SELECT cpu, name FROM events WHERE kind = 'trace_gap' ORDER BY seq, src").to_pylist()
    assert gaps == [{"cpu": 0x10, "name": "error"}, {"cpu": 0x10, "name": "unexpected_data"}]
