"""Experiments: a run, sweeps, load curves, benchmarks and drawings built on the runtimes."""
