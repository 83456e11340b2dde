"""Cobham Gaisler LEON3/LEON4 (GR740) DSU trace buffers: instruction (ITB) and AHB bus traces.

Formats: `leon-itb` and `leon-ahb` (raw dumps, 16-byte lines; name them with --format, give
ITBC0 and the CPU in `DUMP.json`) and `leon-text` (sniffed: four hex words per line under
`# leon-trace kind=... cpu=... itbc0=...` headers). See docs/formats.md.
"""
