"""A transformers ``TrainerCallback`` that watches the model a ``Trainer`` trains.

>>> from graphviz_autograd.integrations.transformers import WatchTrainerCallback  # doctest: +SKIP
>>> callback = WatchTrainerCallback(every=10, tensorboard="runs/watch")  # doctest: +SKIP
>>> Trainer(model, args, train_dataset=data, callbacks=[callback]).train()  # doctest: +SKIP
>>> callback.watcher.findings()  # doctest: +SKIP

The watch starts when training begins (on the model and the Trainer's optimizer, whose
step ends each training step) and ends when it ends. ``tensorboard`` (a log folder or a
``SummaryWriter``) receives each logged step; ``save_json`` writes the record at the end
(rank 0 only).

Needs ``transformers`` (and, for its ``Trainer``, ``accelerate``).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from ..training.watching import DEFAULT_EVERY, Watcher, watch
from ..errors import MissingExtraError
from .tensorboard import log_to_tensorboard

try:
    from transformers import TrainerCallback
except ImportError as error:
    raise MissingExtraError(
        f"WatchTrainerCallback needs transformers ({error}); install it with: pip install transformers accelerate"
    ) from error


class WatchTrainerCallback(TrainerCallback):
    """Watches the model while a ``Trainer`` trains it: ``callback.watcher`` holds the record.

    ``every`` and the other keywords go to :func:`~graphviz_autograd.training.watching.watch`.
    """

    def __init__(
        self,
        every: int = DEFAULT_EVERY,
        tensorboard: Any = None,
        save_json: Union[str, "os.PathLike[str]", None] = None,
        **watch_options: Any,
    ):
        self.every = every
        self.tensorboard = tensorboard
        self.save_json = save_json
        self.watch_options = watch_options
        self.watcher: Optional[Watcher] = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None, **kwargs: Any) -> None:
        self.watcher = watch(model, optimizer=_torch_optimizer(optimizer), every=self.every, **self.watch_options).__enter__()
        if self.tensorboard is not None:
            log_to_tensorboard(self.watcher, self.tensorboard)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.watcher is None:
            return
        self.watcher.__exit__(None, None, None)
        if self.save_json is not None:
            self.watcher.save_json(self.save_json)


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside Accelerate's wrapper of one (its step calls the inner one's)."""
    inner = getattr(optimizer, "optimizer", None)
    if inner is not None and inner is not optimizer and hasattr(inner, "register_step_post_hook"):
        return inner
    return optimizer


__all__ = ["WatchTrainerCallback"]
