"""The CoreSight input format: snapshots, trace buffers and raw streams, whichever protocol
their sources speak (ETMv3, PTM, ETMv4; each in a package of its own beside this one)."""
