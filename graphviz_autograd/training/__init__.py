"""Training: watching a model train (``watch()``): statistics per module call and
parameter over steps, their findings, and the explorer page with a step axis."""
