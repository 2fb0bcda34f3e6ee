"""Testing: the pytest plugin (golden files of a graph's structure or drawing, and the
``autograd_check`` fixture) and the canonical structure text it compares."""
