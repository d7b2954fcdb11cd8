"""The runner: writes plan artifacts, and serves/benchmarks or runs offline where the hardware is present."""
