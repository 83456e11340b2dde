"""The Arm ETMv3 protocol: its registers, packets, ops, data trace and instruction walk."""
