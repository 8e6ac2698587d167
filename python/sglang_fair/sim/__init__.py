"""The simulator: the real policy objects over a model of the executor (no GPU, no wall clock)."""
