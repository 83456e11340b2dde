"""Instructions that a compressed trace leaves out, recovered by walking the program image.

ETM atoms, XScale messages and Tarmac FD/FI records say only where control went (filtered
LEON buffers, whose delay slots may hold transfers, have their own walk in formats/leon). A
decoder turns its records into a column of *waypoint ops* (`ops.Ops`); a `walker.Walker`
follows them through the image and yields `instructions` rows flagged RECONSTRUCTED, plus
`trace_gap` events where the walk cannot go on.

- `ops`: the decoders' side: the ops, their operands, and why a walk loses its place.
- `program`: the instructions of an image reached so far, decoded once, as records compiled
  code reads (`Program`).
- `walker`: the compiled walk over ops (`Walker`).
- `batches`: the walk's output rows as Arrow tables; `gaptexts`: its trace gaps' texts.

What the trace and the image cannot tell is never guessed:
- a reconstructed instruction with a condition whose outcome the trace does not give has
  `executed` null;
- when the walk loses its place (no code at an address, an undefined instruction, the trace
  contradicting the image, an indirect branch whose target never came), the next op that
  needs the position emits one `trace_gap` event naming the reason and the address, and
  the ops are dropped (counted in `Walker.dropped`) until one carries an address again.
"""
