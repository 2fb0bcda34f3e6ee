"""Stand-in ``forward``s set on module instances for a while, as ``record`` and a checkpoint set theirs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any, Callable

from torch import nn


@contextlib.contextmanager
def stand_in_forwards(modules: Iterable[nn.Module], wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Set ``wrap(module.forward)`` on each of ``modules`` (on the instance) while the block runs,
    and put back after what each had of its own: nothing, or a ``forward`` set on it before.

    >>> layer = nn.Linear(2, 2)
    >>> with stand_in_forwards([layer], lambda forward: forward):
    ...     "forward" in vars(layer)
    True
    >>> "forward" in vars(layer)
    False
    """
    own = [(module, vars(module).get("forward")) for module in modules]
    for module, _ in own:
        module.forward = wrap(module.forward)
    try:
        yield
    finally:
        for module, forward in own:
            if forward is None:
                vars(module).pop("forward", None)
            else:
                vars(module)["forward"] = forward
