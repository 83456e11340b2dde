"""Arm ETMv4 instruction trace (ETMv4.0-4.4, A and M profile)."""
