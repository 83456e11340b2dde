"""Arm ETMv3 trace: configuration, packets, and the inputs that carry them."""
