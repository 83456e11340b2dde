# Developer shortcuts. The fuzz campaigns (fuzz/README.md): `make fuzz` is the short one CI
# runs (tests/test_fuzz_short.py), `make fuzz-long` the long one, at the lowest CPU priority.
PYTHON ?= python
SEED ?= 0
SECONDS_LONG ?= 3600

.PHONY: fuzz fuzz-long

fuzz:
	PYTHONPATH=src $(PYTHON) -m fuzz --inputs 800 --seconds 900 --seed $(SEED)

fuzz-long:
	PYTHONPATH=src nice -n 19 $(PYTHON) -m fuzz --seconds $(SECONDS_LONG) --seed $(SEED) \
		--json fuzz/crashers/summary-$(SEED).json
