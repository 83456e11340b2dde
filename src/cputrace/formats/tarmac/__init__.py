"""Arm Tarmac text traces: every record type of the Fast Models plug-in and producer dialects."""
