"""Benchmarks that print figures (speed and memory targets are measured here, not in tests)."""
