"""Many traces at once on a Dask cluster: `cputrace batch` and its Python API.

`cluster` says where the work runs (a local cluster of this machine's cores, or a running
cluster through its scheduler) and runs a job's tasks there; `tasks` is what every task shares
on its worker (failures as values, inputs every worker must be able to read). One module per
job: `ingest` (one store per input), `diff` (pairs of traces), `coverage` (merged coverage of
one image), `profile` (profiles summed). Each sends paths to the workers, runs the existing
analysis there on one trace, and merges the small results on the client.

Light: `distributed` (the `cluster` extra) is imported by `cluster` only, so the rest can be
named without it.
"""
