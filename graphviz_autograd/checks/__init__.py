"""Checks: findings about a walked graph and its gradients (``check()``)."""
