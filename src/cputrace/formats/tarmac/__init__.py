"""Arm Tarmac text traces: every record type of the Fast Models plug-in and producer dialects."""

from .decoder import TarmacDecoder

__all__ = ["TarmacDecoder"]
