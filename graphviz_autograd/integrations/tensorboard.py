"""A watched model's statistics in TensorBoard: scalars and histograms per module.

``log_to_tensorboard(w, writer)`` writes what ``w`` (from :func:`~graphviz_autograd.training.watching.watch`)
has kept and then each logged step as it comes, to a
``torch.utils.tensorboard.SummaryWriter`` (or a log folder, for which one is made):

- a scalar per statistic and module call or parameter, tagged ``statistic/path``
  (``output_grad_norm/transformer.h.0.attn``, ``update_ratio/lm_head.weight``; the
  model itself is ``model``);
- a histogram per kind and module call or parameter, tagged ``log10_abs_kind/path``
  (``log10_abs_activation/transformer.h.0.mlp``), over the watcher's fixed bins of
  log10 of the magnitude (:data:`~graphviz_autograd.training.watching.HISTOGRAM_EDGES`).

Under torch.distributed with ``ranks='reduce'`` only rank 0 writes; with ``'each'``
every rank writes what it measured (give each its own folder).

Needs the ``tensorboard`` package (``pip install graphviz-autograd[tensorboard]``).
"""

from __future__ import annotations

import os
from typing import Any, Union

from ..drawing.rendering import check_writable
from ..training.watching import HISTOGRAM_EDGES, LoggedStep, Watcher, process_rank
from ..errors import InputTypeError, MissingExtraError, OutputPathError


def summary_writer(logdir: Union[str, "os.PathLike[str]"]) -> Any:
    """A ``SummaryWriter`` writing to ``logdir``; a named error saying what to install without
    TensorBoard, and an :class:`~graphviz_autograd.errors.OutputPathError` when ``logdir``
    cannot be a folder to write in (it is a file, or lies in a folder not writable)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:
        raise MissingExtraError(
            f"Writing to TensorBoard needs the tensorboard package ({error}); "
            "install it with: pip install graphviz-autograd[tensorboard]"
        ) from error
    check_writable(logdir, folder=True)
    try:
        return SummaryWriter(log_dir=os.fspath(logdir))
    except OSError as error:
        raise OutputPathError(f"Cannot write into {os.fspath(logdir)!r}: {error.strerror or error}.") from None


class TensorBoardLogger:
    """Writes each logged step of a watcher to a ``SummaryWriter`` (see the module's text for the tags)."""

    def __init__(self, writer: Any):
        if not callable(getattr(writer, "add_scalar", None)) or not callable(getattr(writer, "add_histogram_raw", None)):
            raise InputTypeError(
                f"log_to_tensorboard() takes a torch.utils.tensorboard.SummaryWriter or a log folder; "
                f"got {type(writer).__name__}."
            )
        self.writer = writer

    def __call__(self, watcher: Watcher, logged: LoggedStep) -> None:
        if watcher.ranks == "reduce" and process_rank() != 0:  # the same numbers on every rank: one writes
            return
        step = logged.step
        for statistic, values in logged.values.items():
            for key, value in values.items():
                self.writer.add_scalar(f"{statistic}/{tag_path(key)}", value, step)
        for kind, histograms in logged.histograms.items():
            for key, counts in histograms.items():
                total = sum(counts)
                if not total:
                    continue
                used = [i for i, count in enumerate(counts) if count]
                centers = [(HISTOGRAM_EDGES[i] + HISTOGRAM_EDGES[i + 1]) / 2 for i in range(len(counts))]
                self.writer.add_histogram_raw(
                    f"log10_abs_{kind}/{tag_path(key)}",
                    min=HISTOGRAM_EDGES[used[0]],
                    max=HISTOGRAM_EDGES[used[-1] + 1],
                    num=total,
                    sum=sum(c * n for c, n in zip(centers, counts)),
                    sum_squares=sum(c * c * n for c, n in zip(centers, counts)),
                    bucket_limits=list(HISTOGRAM_EDGES[1:]),
                    bucket_counts=list(counts),
                    global_step=step,
                )
        self.writer.flush()


def tag_path(key: str) -> str:
    """A module call or parameter as a tag's tail: the model itself ('') is ``model``."""
    return key or "model"


def log_to_tensorboard(watcher: Watcher, writer: Union[Any, str, "os.PathLike[str]"]) -> TensorBoardLogger:
    """Write ``watcher``'s kept steps to ``writer`` (a ``SummaryWriter``, or a log folder), and
    each later logged step as it comes. Returns the logger (its ``writer`` attribute).

    >>> import torch, tempfile
    >>> from graphviz_autograd import watch
    >>> model = torch.nn.Linear(2, 1)
    >>> with watch(model, every=1) as w, tempfile.TemporaryDirectory() as logs:
    ...     logger = log_to_tensorboard(w, logs)
    ...     model(torch.ones(1, 2)).sum().backward(); w.step()
    ...     logger.writer.close()
    """
    if isinstance(writer, (str, os.PathLike)):
        writer = summary_writer(writer)
    logger = TensorBoardLogger(writer)
    for logged in watcher.logged_steps:
        logger(watcher, logged)
    watcher.listen(logger)
    return logger


__all__ = ["TensorBoardLogger", "log_to_tensorboard", "summary_writer", "tag_path"]
