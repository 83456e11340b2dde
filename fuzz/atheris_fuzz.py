"""Coverage-guided fuzzing of one target's input file with atheris (libFuzzer), optional.

atheris instruments the bytecode of cputrace's pure-Python modules as they are imported and
steers libFuzzer's mutations by the branches they reach. Modules that use numba are left
alone: numba compiles their functions from bytecode, which the instrumentation would change,
and their compiled code has no Python branches to count anyway. Every input is ingested in
both modes; a crash or a broken store raises, which libFuzzer reports and saves
(`crash-HASH` in the working folder; its `-timeout` and `-rss_limit_mb` catch hangs and
blow-ups). atheris is not a dependency of cputrace: install it where it has a wheel.

    python -m fuzz.atheris_fuzz TARGET [CORPUS_DIR] [-max_total_time=600 -timeout=30 ...]
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

from .case import CRASH, INVALID, run_case, seed_case
from .targets import all_targets


class Finding(Exception):
    """An input that crashed cputrace or made a store that breaks the model."""


def compiled_modules() -> list[str]:
    """cputrace's modules that use numba: not to be instrumented."""
    spec = importlib.util.find_spec("cputrace")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("cputrace is not importable: set PYTHONPATH=src or install it")
    root = Path(next(iter(spec.submodule_search_locations)))
    names = []
    for path in sorted(root.rglob("*.py")):
        if "numba" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def main(argv: list[str]) -> None:
    import atheris

    targets = {t.name: t for t in all_targets()}
    if not argv or argv[0] not in targets:
        names = ", ".join(targets)
        raise SystemExit(f"usage: python -m fuzz.atheris_fuzz TARGET [CORPUS] [FLAGS]; targets: {names}")
    target = targets[argv[0]]
    with atheris.instrument_imports(include=["cputrace"], exclude=compiled_modules()):
        import cputrace.ingest  # noqa: F401  (imported here to be instrumented)
        from cputrace.formats import FORMATS, get_decoder

        for name in FORMATS:  # decoders load on first use: load them inside the instrumentation
            get_decoder(name)
    files = target.load()
    scratch = Path(tempfile.mkdtemp(prefix="cputrace-atheris-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # where libFuzzer exits normally
    corpus = [a for a in argv[1:] if not a.startswith("-")]
    if not corpus:  # start from the seed
        corpus = [str(scratch / "corpus")]
        Path(corpus[0]).mkdir()
        (Path(corpus[0]) / target.main).write_bytes(files[target.main])

    def one_input(data: bytes) -> None:
        case = seed_case(target, files)
        case.files[target.main] = data
        for strict in (False, True):
            result = run_case(case, strict, scratch / "case")
            if result.outcome in (CRASH, INVALID):
                raise Finding(f"{result.signature} ({'strict' if strict else 'lenient'})\n{result.traceback}")

    flags = [a for a in argv[1:] if a.startswith("-")]
    atheris.Setup([sys.argv[0], *flags, *corpus], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv[1:])
