"""Calls: detection, and the two shapes every call-based output is made from.

- log.py: what detection tells its consumers, a typed log per chunk of a core (`CallLog`),
  and the `Method` that decides calls.
- detect.py: the detector (register and ISA rules, compiled) and `detect`, the one loop that
  reads a window and hands each log to the followers.
- contexts.py (with its compiled trie.py): calls summed per calling context while detection
  runs, for the flat call profile, folded stacks and callgrind (`CallSums`).
- frames.py (with nesting.py): every frame in tree order, spilled to disk and read back in
  nested blocks, for `calls --tree`, the frames table and the timelines (`FrameStream`).
- tables.py: the Arrow shapes of frames, functions, self costs and call edges.
"""
