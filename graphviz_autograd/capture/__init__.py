"""Capture: the only stage that touches torch. It walks the autograd graph from the
outputs, records the forward pass (modules, why inputs carry no gradient) and names
tensors, and hands on a plain-data ``AutogradGraph``."""
