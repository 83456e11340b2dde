"""Arm PTM (Program Flow Trace, PFT v1.0 and v1.1) packets and their decoding into instructions."""
