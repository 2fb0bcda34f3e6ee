"""A PyTorch Lightning callback that watches the module being fitted.

>>> from graphviz_autograd.integrations.lightning import WatchCallback  # doctest: +SKIP
>>> trainer = lightning.Trainer(callbacks=[WatchCallback(every=10)])  # doctest: +SKIP
>>> trainer.fit(module); callback.watcher.findings()  # doctest: +SKIP

The watch starts when fitting starts (on the LightningModule and its first optimizer,
whose step ends each training step) and ends when fitting ends or fails. When the
trainer's logger is TensorBoard's, each logged step's scalars and histograms go to it
(see :mod:`graphviz_autograd.integrations.tensorboard`); ``save_json`` writes the
record when fitting ends (rank 0 only).

Needs ``lightning`` (or the older ``pytorch_lightning``): ``pip install graphviz-autograd[lightning]``.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

from ..training.watching import DEFAULT_EVERY, Watcher, watch
from ..errors import MissingExtraError
from .tensorboard import log_to_tensorboard

try:
    from lightning.pytorch import Callback
except ImportError:  # the package's older name
    try:
        from pytorch_lightning import Callback  # type: ignore[assignment]
    except ImportError as error:
        raise MissingExtraError(
            f"WatchCallback needs PyTorch Lightning ({error}); install it with: pip install graphviz-autograd[lightning]"
        ) from error


class WatchCallback(Callback):
    """Watches ``pl_module`` while a ``Trainer`` fits it: ``callback.watcher`` holds the record.

    ``every`` and the other keywords go to :func:`~graphviz_autograd.training.watching.watch`;
    ``tensorboard=False`` keeps the statistics out of a TensorBoard logger;
    ``save_json`` (a path) writes the record when fitting ends.
    """

    def __init__(
        self,
        every: int = DEFAULT_EVERY,
        tensorboard: bool = True,
        save_json: Union[str, "os.PathLike[str]", None] = None,
        **watch_options: Any,
    ):
        super().__init__()
        self.every = every
        self.tensorboard = tensorboard
        self.save_json = save_json
        self.watch_options = watch_options
        self.watcher: Optional[Watcher] = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        optimizers = list(getattr(trainer, "optimizers", []) or [])
        optimizer = _torch_optimizer(optimizers[0]) if optimizers else None
        self.watcher = watch(pl_module, optimizer=optimizer, every=self.every, **self.watch_options).__enter__()
        if self.tensorboard:
            for logger in getattr(trainer, "loggers", []) or []:
                experiment = getattr(logger, "experiment", None)
                if callable(getattr(experiment, "add_histogram_raw", None)):
                    log_to_tensorboard(self.watcher, experiment)
                    break

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._stop()
        if self.watcher is not None and self.save_json is not None:
            self.watcher.save_json(self.save_json)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.watcher is not None:
            self.watcher.__exit__(None, None, None)


def _torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside Lightning's or Accelerate's wrapper of one."""
    for attribute in ("_optimizer", "optimizer"):
        inner = getattr(optimizer, attribute, None)
        if inner is not None and inner is not optimizer and hasattr(inner, "register_step_post_hook"):
            return inner
    return optimizer


__all__ = ["WatchCallback"]
