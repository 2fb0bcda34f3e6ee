"""Checks: what is learnt about a model beyond its graph: findings about the graph and its
gradients (``check()``), and the measured time and memory of a training step
(``profile_step()``)."""
