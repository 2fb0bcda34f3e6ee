"""Load a model file that follows the samples' convention, and run it.

A model file is a Python file that defines, at module level:

- ``model``: an ``nn.Module``, or a function with no arguments returning one;
- ``example_inputs``: the forward's inputs (a tuple of positional arguments, a
  dict of keyword arguments or a single tensor), or a function returning them;
- optionally ``loss(output)``: a function turning the model's output into the
  tensor to draw (e.g. a scalar loss). Without it the output itself is drawn.

>>> import pathlib
>>> loaded = load_model_file(pathlib.Path(__file__).parent.parent / "samples" / "affine.py")
>>> type(loaded.model).__name__, loaded.run().shape
('Affine', torch.Size([1]))
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from .errors import GraphvizAutogradError

CONVENTION = (
    "a model file defines `model` (an nn.Module or a function returning one) and "
    "`example_inputs` (a tuple, a dict or a tensor, or a function returning one), "
    "and optionally `loss(output)`"
)


class ModelFileError(GraphvizAutogradError, ValueError):
    """A model file is missing, fails to import, or does not follow the convention."""


@dataclass(frozen=True)
class LoadedModel:
    """What a model file defines, ready to run."""

    path: Path
    model: torch.nn.Module
    example_inputs: Any
    loss: Optional[Callable[[Any], Any]] = None

    def run(self) -> Any:
        """Run the forward pass (and ``loss``, when defined); return what to draw."""
        inputs = self.example_inputs
        try:
            if isinstance(inputs, dict):
                output = self.model(**inputs)
            elif isinstance(inputs, tuple):
                output = self.model(*inputs)
            else:
                output = self.model(inputs)
        except Exception as error:
            raise ModelFileError(
                f"{self.path}: the forward pass of {type(self.model).__name__} failed: "
                f"{type(error).__name__}: {error}"
            ) from error
        if self.loss is None:
            return output
        try:
            return self.loss(output)
        except Exception as error:
            raise ModelFileError(f"{self.path}: loss(output) failed: {type(error).__name__}: {error}") from error


def load_model_file(path: "str | os.PathLike[str]") -> LoadedModel:
    """Import ``path`` as a fresh module (its folder importable) and read the convention."""
    file = Path(path)
    if not file.exists():
        raise ModelFileError(f"Model file {os.fspath(path)!r} does not exist.")
    if not file.is_file():
        raise ModelFileError(f"Model file {os.fspath(path)!r} is not a file; give the path of a .py file.")
    namespace = _import_file(file)
    found = sorted(k for k in namespace if not k.startswith("_"))
    if "model" not in namespace or "example_inputs" not in namespace:
        missing = " and ".join(k for k in ("model", "example_inputs") if k not in namespace)
        raise ModelFileError(
            f"{file}: defines no {missing}; {CONVENTION}. It defines: {', '.join(found) or 'nothing'}."
        )
    model = _call_if_function(namespace["model"], file, "model")
    if not isinstance(model, torch.nn.Module):
        raise ModelFileError(f"{file}: `model` must be an nn.Module or a function returning one; got {type(model).__name__}.")
    inputs = _call_if_function(namespace["example_inputs"], file, "example_inputs")
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    loss = namespace.get("loss")
    if loss is not None and not callable(loss):
        raise ModelFileError(f"{file}: `loss` must be a function of the model output; got {type(loss).__name__}.")
    return LoadedModel(file, model, inputs, loss)


def _import_file(file: Path) -> dict[str, Any]:
    module_name = f"_graphviz_autograd_model_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{file}: cannot be imported as Python; give a .py file.")
    module = importlib.util.module_from_spec(spec)
    folder = str(file.resolve().parent)
    sys.path.insert(0, folder)  # like `python file.py`: the file's folder is importable
    try:
        spec.loader.exec_module(module)
    except OSError as error:
        raise ModelFileError(f"Model file {str(file)!r} cannot be read: {error.strerror or error}.") from error
    except Exception as error:
        raise ModelFileError(f"{_user_frame(error, file)}: importing the model file raised {type(error).__name__}: {error}") from error
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass
    return vars(module)


def _call_if_function(value: Any, file: Path, name: str) -> Any:
    if isinstance(value, torch.nn.Module) or not callable(value) or isinstance(value, torch.Tensor):
        return value
    try:
        return value()
    except Exception as error:
        raise ModelFileError(f"{_user_frame(error, file)}: {name}() raised {type(error).__name__}: {error}") from error


def _user_frame(error: BaseException, file: Path) -> str:
    """'file:line' of the deepest frame in the user's file, for messages."""
    if isinstance(error, SyntaxError) and error.lineno:
        return f"{file}:{error.lineno}"
    where = str(file)
    resolved = str(file.resolve())
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.abspath(frame.filename) == resolved:
            where = f"{file}:{frame.lineno}"
    return where
