"""CoreSight infrastructure shared by every trace protocol.

`sniff` recognises inputs from their first bytes, `frames` removes the formatter's 16-byte
frames, `snapshot` reads snapshot directories (`ini` their files, `dumps` the memory they
dump). Import the module you need: `frames` loads the compiled deformatter, which sniffing an
input must not wait for.
"""
