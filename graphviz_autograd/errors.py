"""Named errors. Each one also inherits the builtin it resembles, so that
``except ValueError`` keeps working for callers who don't know this package."""

from __future__ import annotations

from typing import Any, Collection, Optional

GRAPHVIZ_INSTALL_HINT = (
    "Install Graphviz (Debian/Ubuntu: 'apt-get install graphviz', macOS: "
    "'brew install graphviz', conda: 'conda install -c conda-forge graphviz') "
    "or write a .dot file instead, which needs no Graphviz"
)


def first_line(text: Any, empty: str = "") -> str:
    """The first line of ``text`` (an exception's message, or any text), ``empty`` when it has none:
    how every message of this package quotes an error raised by someone else's code.

    >>> first_line(ValueError("bad shape\\n  at line 3")), first_line(KeyError(), "(no message)")
    ('bad shape', '(no message)')
    """
    lines = str(text).strip().splitlines()
    return lines[0] if lines else empty


class GraphvizAutogradError(Exception):
    """Base class of every error this package raises on purpose."""


class NoGraphError(GraphvizAutogradError, ValueError):
    """The outputs hold no tensor that carries an autograd graph."""


class InputTypeError(GraphvizAutogradError, TypeError):
    """An argument has a type this package cannot use (outputs, params, ...)."""


class OptionError(GraphvizAutogradError, ValueError):
    """An option has a value outside what it accepts (format, direction, theme, ...)."""


class GraphvizNotFoundError(GraphvizAutogradError, RuntimeError):
    """The Graphviz ``dot`` executable is needed but is not on PATH."""


class RenderError(GraphvizAutogradError, RuntimeError):
    """Graphviz failed, timed out, or the result could not be written."""


class OutputPathError(RenderError):
    """The output path cannot be written (missing directory, no permission, ...)."""


class CheckFailedError(GraphvizAutogradError, AssertionError):
    """``check(..., fail_on=...)`` found findings at or above that severity; ``findings`` holds them."""

    def __init__(self, message: str, findings: "list | tuple" = ()):
        super().__init__(message)
        self.findings = list(findings)


class LayoutTimeoutError(RenderError):
    """Graphviz did not finish within the time it was given (and was stopped)."""


class StepFailedError(GraphvizAutogradError, RuntimeError):
    """A training step being profiled raised; the model's state was restored before this was raised."""


class DeviceUnavailableError(GraphvizAutogradError, RuntimeError):
    """A device was asked for that this machine or this build of torch does not have (CUDA without CUDA)."""


class MetaDeviceError(GraphvizAutogradError, ValueError):
    """A model on the meta device has shapes but no data: there is nothing to run and time."""


class NoModulesError(GraphvizAutogradError, ValueError):
    """A roll-up by module was asked of a graph that knows no modules (walked without a recorder of the model)."""


class GraphTooBigError(GraphvizAutogradError, ValueError):
    """A graph is bigger than what is asked of it can take (the explorer page's node limit)."""


class MissingExtraError(GraphvizAutogradError, ImportError):
    """An optional library is needed (TensorBoard, Lightning, transformers) and is not installed."""


class CompiledCaptureError(GraphvizAutogradError, RuntimeError):
    """What a torch.compile'd region holds could not be read: this torch lacks an internal that
    capture needs, or the region was compiled before ``record()`` began."""


def check_choice(name: str, value: object, choices: Collection[Any], shown: Optional[str] = None) -> None:
    """An OptionError unless ``value`` is one of ``choices``, in one sentence naming ``name``
    and the choices (``shown`` writes them, when they read better otherwise).

    >>> check_choice("direction", "up", ("TB", "LR"))
    Traceback (most recent call last):
    ...
    graphviz_autograd.errors.OptionError: direction must be one of TB, LR; got 'up'.
    """
    if value not in choices:
        listed = shown if shown is not None else ", ".join(map(str, choices))
        raise OptionError(f"{name} must be one of {listed}; got {value!r}.")
