"""The interactive trace browser (`cputrace browse`): an engine, and a Textual app on top of it.

The engine imports no Textual, so it is tested and measured alone:

- session.py: `Session`, the one object the app talks to (its docstring lists the API).
- index.py: the browse index, built once per store; keyed.py: its files, sorted by a key in
  small row groups.
- lines.py: the trace pane's lines and records; targets.py: direct branch targets.
- expressions.py: address expressions (`main+0x10`, `sp+16`).
- navigate.py: next/previous visits, exceptions, trace gaps, SQL search matches.
- calls.py: stacks, the calls holding a point, the call tree; folds.py: folded calls.
- registers.py, memory.py: registers and memory at a point; source.py: source lines of a pc.
- timeline.py: the timeline strip; diffview.py: two traces aligned as `cputrace diff` does.

The app (app.py, panes/, screens) shows a Session in a terminal or, served, in a web browser.
"""
