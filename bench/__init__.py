"""The sendonce benchmark: `python -m bench` (or `make bench`) writes bench/results.json."""
