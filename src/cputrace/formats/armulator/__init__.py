"""ARMulator Tracer output (ARM ADS / SDT): the decoder (decoder.py: the format's rules), its
compiled scanner, the opcode fetches' numbering and the split across workers."""
