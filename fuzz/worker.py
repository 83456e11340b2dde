"""A forked worker that runs cases one at a time, watched for time and memory by its parent.

The parent has imported cputrace and decoded every seed once, so the compiled code is in
memory: a child forked from it (copy-on-write) starts in milliseconds and runs each case
warm. The parent watches the child's CPU time and resident memory between its answers and
kills it past the limits; faulthandler in the child writes its Python stack to a file on a
fatal signal, and on the parent's SIGUSR1 just before such a kill, so every finding says
where it happened.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import resource
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection, Pipe
from pathlib import Path

from .case import BLOWUP, CRASH, HANG, Case, Result, run_case, where_in_cputrace_text

POLL_SECONDS = 0.02
WALL_FACTOR = 3
"""A case may take this many times its CPU-time limit in wall time (on a loaded machine)
before it counts as hung: a worker blocked without using CPU hangs too."""
STACK_GRACE_SECONDS = 0.5
"""Time given to the child to write its stack (SIGUSR1) before it is killed."""
ADDRESS_SPACE_FACTOR = 4
"""The child's address space may grow by this many memory limits before allocations fail:
a backstop for growth faster than the polling sees, with room for what is reserved but
never touched (thread stacks, allocator arenas)."""
FILE_BYTES = 2 << 30
"""No file a case writes may pass this (the store of a 16 MiB input is far smaller)."""
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Limits:
    seconds: float  # CPU time of one ingest
    memory: int  # bytes of resident memory over the worker's at the start of the case


class Worker:
    """A child process serving cases; a new one replaces it after a crash, hang or blow-up."""

    def __init__(self, folder: Path, memory_limit: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.stack_file = folder / "stack.txt"
        ours, theirs = Pipe()
        pid = os.fork()
        if pid == 0:  # the child: serve until the parent closes the pipe, never return
            status = 0
            try:
                ours.close()
                _serve(theirs, folder, self.stack_file, memory_limit)
            except BaseException:
                status = 1
            finally:
                os._exit(status)
        theirs.close()
        self.pid = pid
        self.conn: Connection = ours
        self.cases = 0

    def run(self, case: Case, strict: bool, limits: Limits) -> tuple[Result, bool]:
        """The result of the case, and whether the worker is still alive to run another."""
        self.cases += 1
        baseline = _resident(self.pid)
        cpu_start = _cpu_seconds(self.pid)
        started = time.monotonic()
        self.conn.send((case, strict))
        while True:
            if self.conn.poll(POLL_SECONDS):
                try:
                    return self.conn.recv(), True
                except EOFError:
                    return self._died(_wait(self.pid), started), False
            status = _exited(self.pid)
            if status is not None:
                return self._died(status, started), False
            grown = _resident(self.pid) - baseline
            if grown > limits.memory:
                return self._stop(BLOWUP, f"resident memory grew by {grown >> 20} MiB", started), False
            cpu = _cpu_seconds(self.pid) - cpu_start
            wall = time.monotonic() - started
            if cpu > limits.seconds or wall > WALL_FACTOR * limits.seconds:
                why = f"still running after {cpu:.1f} s of CPU ({wall:.1f} s), limit {limits.seconds:.1f} s"
                return self._stop(HANG, why, started), False

    def close(self) -> None:
        """End the child: gently (it leaves when the pipe closes), then for sure."""
        self.conn.close()
        for _ in range(50):
            if _exited(self.pid) is not None:
                return
            time.sleep(POLL_SECONDS)
        self._kill()

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def _stop(self, outcome: str, why: str, started: float) -> Result:
        resident = _resident(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR1)  # faulthandler: the stack, as it is now
        time.sleep(STACK_GRACE_SECONDS)
        self._kill()
        self.conn.close()
        stack = self._stack()
        where = where_in_cputrace_text(stack)
        return Result(outcome, time.monotonic() - started, resident, f"{outcome} at {where}", why, stack)

    def _died(self, status: int | None, started: float) -> Result:
        self.conn.close()
        if status is None:
            name, outcome = "an unknown end", CRASH
        elif os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            outcome = BLOWUP if name == "SIGXFSZ" else CRASH
        else:
            name, outcome = f"exit status {os.WEXITSTATUS(status)}", CRASH
        stack = self._stack()
        where = where_in_cputrace_text(stack)
        return Result(
            outcome, time.monotonic() - started, 0, f"{name} at {where}", f"worker died: {name}", stack
        )

    def _stack(self) -> str:
        try:
            return self.stack_file.read_text(errors="replace")[-6000:]
        except OSError:
            return ""


def _serve(conn: Connection, folder: Path, stack_file: Path, memory_limit: int) -> None:
    """The child's loop: run each case sent, answer with its result."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    output = os.open(folder / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(output, 1)
    os.dup2(output, 2)
    stack = open(stack_file, "w+")  # noqa: SIM115 (open for the child's life, for faulthandler)
    faulthandler.enable(stack, all_threads=True)
    faulthandler.register(signal.SIGUSR1, stack, all_threads=True)
    address_space = _virtual(os.getpid()) + ADDRESS_SPACE_FACTOR * memory_limit
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    while True:
        try:
            case, strict = conn.recv()
        except EOFError:
            return
        stack.seek(0)
        stack.truncate()
        _reset_peak()
        try:
            result = run_case(case, strict, folder / "case")
        except BaseException as exc:  # run_case lets only what is not an Exception through
            result = Result(
                CRASH, signature=f"{type(exc).__name__} (not an Exception)", message=str(exc)[:2000]
            )
        result.peak_rss = _peak()
        conn.send(result)


def _proc(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/{name}") as f:
        return f.read()


def _resident(pid: int) -> int:
    try:
        return int(_proc(pid, "statm").split()[1]) * _PAGE
    except (OSError, IndexError):
        return 0


def _virtual(pid: int) -> int:
    return int(_proc(pid, "statm").split()[0]) * _PAGE


def _cpu_seconds(pid: int) -> float:
    """User and system time of the process (all its threads)."""
    try:
        fields = _proc(pid, "stat").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _reset_peak() -> None:
    """Start VmHWM (peak resident memory) afresh for this case."""
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak() -> int:
    found = re.search(r"VmHWM:\s+(\d+) kB", _proc(os.getpid(), "status"))
    return int(found.group(1)) << 10 if found else 0


def _exited(pid: int) -> int | None:
    """The wait status of the child if it has ended (reaping it), else None."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # already reaped
        return 0
    return status if done else None


def _wait(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None
