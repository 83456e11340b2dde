"""Analyses over an ingested trace: calls, profile, coverage, diff, state at a point."""
