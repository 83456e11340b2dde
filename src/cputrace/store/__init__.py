"""Stores: writing them, and every way of reading them.

A store is a folder `NAME.ctrace/` holding `manifest.json` and the four tables of docs/model.md
as Parquet files, in a version folder the manifest names: a file per table, or in a
partitioned store a folder of parts per table (`manifest.table_files`). Analyses and exports
read stores only through this package, which reads both kinds alike:

- `trace.Trace`: one version of a store held open; its tables as Arrow, SQL over them.
- `sql`: the DuckDB connections `Trace.sql` runs in, hex literals, `--where` conditions.
- `window`: a seq range of a trace (`--since`/`--until`), and what reading it skips.
- `batches`: a table's record batches in seq order, bounded; rows of another table kept in
  step with them.
- `chunks`: instructions as per-core NumPy columns, chunk by chunk, with their register
  writes and durations.
- `columns`: Arrow columns as NumPy arrays, and chunks of such arrays.
- `indexes`: derived indexes kept beside a version's tables, rebuilt when stale.
- `write`: `StoreWriter`, which writes the tables (ingest.py feeds it); `PartWriter` and
  `PartitionedStoreWriter`, the parts of a split input (batch/partition.py).
- `folder`: version folders, readers' locks, atomic replacement.
- `manifest`: manifest.json, checked before anything else is trusted.
- `checksums`: the files' hashes, checked on opening and by `cputrace verify`.
"""
