"""Benchmarks of the walk and the DOT generation, run by hand: ``python -m benchmarks``."""
