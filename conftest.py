"""What pytest collects from the package itself: the modules of optional extras only
where their library is installed (their doctests import it)."""

from __future__ import annotations

import importlib.util

_EXTRAS = {
    "graphviz_autograd/integrations/lightning.py": ("lightning", "pytorch_lightning"),
    "graphviz_autograd/integrations/transformers.py": ("transformers",),
    "graphviz_autograd/integrations/tensorboard.py": ("tensorboard",),
}

collect_ignore = [
    path for path, libraries in _EXTRAS.items() if not any(importlib.util.find_spec(name) for name in libraries)
]
