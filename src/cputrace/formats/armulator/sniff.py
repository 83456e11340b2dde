"""Recognising ARMulator Tracer output from its first lines (loaded with the format registry:
nothing of the decoder's)."""

from __future__ import annotations

import re

SNIFF_LINES = 400

_SHAPE = re.compile(
    r"(?:T\s+[0-9A-Fa-f]{1,16}\s+)?(?:"
    r"I[TS]\s+[0-9A-Fa-f]{8}\s+[0-9A-Fa-f]{4}(?:[0-9A-Fa-f]{4})?(?:\s|$)"
    r"|[MB](?:[NSA][RW][1248][OLSD_]*[48]?\s+[0-9A-Fa-f]{8}|IO?|C)(?:\s|$)"
    r"|R(?:CP)?\s+[A-Za-z]\w*=[0-9A-Fa-fx]+"
    r"|E\s+[0-9A-Fa-f]{8}\s+[0-9A-Fa-f]{8}\s+[0-9A-Fa-f]+"
    r")"
)
_TARMAC_TIME = re.compile(r"\d+\s*(?:clk|cyc|tic|ps|ns|us|ms|s)\b")


def sniff(head: bytes) -> int:
    """Sure on the Tracer's header; otherwise by the share of lines shaped like its records.

    Tarmac lines start with a time and unit (`12 clk IT ...`), which none of ours do.
    """
    text = head.decode("latin-1").replace("\xc2\xa0", " ").replace("\xa0", " ")
    lines = [line.strip() for line in text.split("\n", SNIFF_LINES)[:SNIFF_LINES]]
    lines = [line for line in lines if line]
    if not lines:
        return 0
    if any(line.startswith("Source:") and "Armul" in line for line in lines):
        return 95
    keys = {line.split(None, 1)[0] for line in lines}
    if {"Date:", "Options:"} <= keys and any(
        line.startswith("Options:") and "Trace" in line for line in lines
    ):
        return 85
    ours = sum(1 for line in lines if _SHAPE.match(line))
    tarmac = sum(1 for line in lines if _TARMAC_TIME.match(line))
    if tarmac >= ours:
        return 5 if ours else 0
    share = ours / len(lines)
    return round(80 * share) if share > 0.5 else round(40 * share)
