"""Load a model to draw: a model file, a factory, or a ``torch.export`` archive.

A model file is a Python file that defines, at module level:

- ``model``: an ``nn.Module``, or a function with no arguments returning one;
- ``example_inputs``: the forward's inputs (a tuple of positional arguments, a
  dict of keyword arguments or a single tensor), or a function returning them;
- optionally ``loss(output)``: a function turning the model's output into the
  tensor to draw (e.g. a scalar loss). Without it the output itself is drawn.

:func:`load_model` also takes ``path/to/file.py:factory`` and
``package.module:factory`` (a function returning ``(model, example_inputs)``) and
a ``torch.export`` archive (``.pt2``). Model code runs as ``python file.py`` would
run it: the file's folder (for a module, the current folder) is importable.

>>> import pathlib
>>> loaded = load_model_file(pathlib.Path(__file__).parents[2] / "samples" / "affine.py")
>>> type(loaded.model).__name__, loaded.run().shape
('Affine', torch.Size([1]))
>>> sorted(loaded.tensor_names())
['b', 'w', 'x']
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import importlib.util
import inspect
import logging
import os
import re
import sys
import sysconfig
import traceback
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

import torch

from ..capture.attribute_names import unregistered_tensors
from ..errors import GraphvizAutogradError, OptionError, first_line
from ..capture.naming import named_tensors

if TYPE_CHECKING:
    from ..capture.recording import Recorder

CONVENTION = (
    "a model file defines `model` (an nn.Module or a function returning one) and "
    "`example_inputs` (a tuple, a dict or a tensor, or a function returning one), "
    "and optionally `loss(output)`"
)
SUPPORTED_FORMS = (
    "a model file (model.py), a factory returning (model, example_inputs) "
    "(file.py:factory or package.module:factory), or a torch.export archive (.pt2)"
)

# Kinds of model spec.
MODEL_FILE = "model file"
FILE_FACTORY = "file factory"
MODULE_FACTORY = "module factory"
EXPORT_ARCHIVE = "torch.export archive"

# Files that torch.save() usually writes; they are pickles, not code we can import.
PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt", ".tar")

Shape = tuple[int, ...]

_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTOCOL = 0x80  # the first byte of a pickle of protocol 2 or later


# What user code may raise while it loads or runs: SystemExit too, since a script's
# sys.exit(0) would otherwise end the command silently with status 0.
USER_CODE_ERRORS = (Exception, SystemExit)


def _raised(error: BaseException) -> str:
    """'KeyError: 'depth'' for a message; a sys.exit() call named as such, with the fix."""
    if isinstance(error, SystemExit):
        return (
            f"SystemExit (sys.exit({error.code!r})): a model file must not exit; keep script code "
            f"under `if __name__ == \"__main__\":`"
        )
    return f"{type(error).__name__}: {error}"


class ModelFileError(GraphvizAutogradError, ValueError):
    """A model file is missing, fails to import, or does not follow the convention."""


@dataclass(frozen=True)
class ModelSpec:
    """What a user named as the model: parsed, not yet loaded.

    >>> parse_model_spec("models/net.py:build").kind
    'file factory'
    >>> parse_model_spec("mypackage.models:build").stem
    'models'
    """

    text: str
    kind: str
    path: Optional[Path] = None
    module: Optional[str] = None
    factory: Optional[str] = None

    @property
    def stem(self) -> str:
        """A name for output files: the file's stem, or the module's last part."""
        if self.path is not None:
            return self.path.stem or "graph"
        return (self.module or "graph").rpartition(".")[2]


def parse_model_spec(text: str) -> ModelSpec:
    """Tell a file, ``file.py:factory``, ``package.module:factory`` and a ``.pt2`` apart.

    An existing file always wins, so a file whose name holds a colon still loads.
    """
    path = Path(text)
    if ":" in text and not path.exists():
        left, _, right = text.rpartition(":")
        is_drive = len(left) == 1 and left.isalpha()  # C:\models\net.py
        if left and not is_drive and _DOTTED_NAME.fullmatch(right):
            if left.endswith(".py") or "/" in left or os.sep in left or Path(left).exists():
                return ModelSpec(text, FILE_FACTORY, path=Path(left), factory=right)
            if _DOTTED_NAME.fullmatch(left):
                return ModelSpec(text, MODULE_FACTORY, module=left, factory=right)
    kind = EXPORT_ARCHIVE if path.suffix.lower() == ".pt2" else MODEL_FILE
    return ModelSpec(text, kind, path=path)


@dataclass(frozen=True)
class LoadedModel:
    """What a model file defines, ready to run.

    ``source`` names the model as the user did (for messages), ``notes`` holds
    what the loader had to decide on the user's behalf, for the caller to show.
    """

    path: Path
    model: torch.nn.Module
    example_inputs: Any
    loss: Optional[Callable[[Any], Any]] = None
    source: str = ""
    notes: tuple[str, ...] = ()
    exported: bool = False

    def __post_init__(self) -> None:
        if not self.source:
            object.__setattr__(self, "source", str(self.path))

    def run(self, recorder: Optional["Recorder"] = None) -> Any:
        """Run the forward pass (and ``loss``, when defined); return what to draw.

        With a ``recorder`` (from :func:`~graphviz_autograd.capture.recording.record`) both run
        inside it.
        """
        with recorder if recorder is not None else contextlib.nullcontext():
            return self._run()

    def _run(self) -> Any:
        inputs = self.example_inputs
        try:
            if isinstance(inputs, dict):
                output = self.model(**inputs)
            elif isinstance(inputs, tuple):
                output = self.model(*inputs)
            else:
                output = self.model(inputs)
        except USER_CODE_ERRORS as error:
            hint = (
                " An exported program runs only on inputs shaped like those it was exported with."
                if self.exported
                else ""
            )
            raise ModelFileError(
                f"{self._where(error)}: the forward pass of {type(self.model).__name__}"
                f"{_describe_input_shapes(inputs)} failed: {_raised(error)}{hint}"
            ) from error
        if self.loss is None:
            return output
        try:
            return self.loss(output)
        except USER_CODE_ERRORS as error:
            raise ModelFileError(f"{self._where(error)}: loss(output) failed: {_raised(error)}") from error

    def with_mode(self, training: Optional[bool]) -> "LoadedModel":
        """This model in train (``True``) or eval (``False``) mode; ``None`` keeps the mode.

        The model is never changed: when a mode switch is needed it happens on a
        deep copy, so the caller's module keeps its flags and its parameters.

        >>> import torch
        >>> net = torch.nn.Dropout()
        >>> evaluated = LoadedModel(Path("net.py"), net, torch.ones(1)).with_mode(False)
        >>> net.training, evaluated.model.training
        (True, False)
        """
        if training is None:
            return self
        if self.exported:
            raise ModelFileError(
                f"{self.source}: the train/eval mode of a torch.export program is fixed when it is "
                f"exported; export it again from a model in {'train' if training else 'eval'} mode instead."
            )
        if all(module.training == training for module in self.model.modules()):
            return self
        try:
            model = copy.deepcopy(self.model)
        except Exception as error:
            raise ModelFileError(
                f"{self.source}: cannot copy {type(self.model).__name__} to switch it to "
                f"{'train' if training else 'eval'} mode ({_raised(error)}); "
                f"call model.{'train' if training else 'eval'}() in the model file instead."
            ) from error
        model.train(training)
        return dataclasses.replace(self, model=model)

    def input_names(self) -> dict[str, torch.Tensor]:
        """The example inputs by the forward's argument names (``input[0]``... without them).

        Nested inputs are named by their place: ``pair[0]``, ``batch.mask``.
        """
        inputs = self.example_inputs
        if isinstance(inputs, dict):
            top = [(str(key), value) for key, value in inputs.items()]
        else:
            args = inputs if isinstance(inputs, tuple) else (inputs,)
            top = list(zip(_positional_names(self.model, len(args)), args))
        names: dict[str, torch.Tensor] = {}
        for name, value in top:
            for inner_name, tensor in named_tensors(value, name):
                names.setdefault(inner_name, tensor)
        return names

    def tensor_names(self) -> dict[str, torch.Tensor]:
        """Names for the graph's leaves: parameters, buffers, then the example inputs.

        A tensor met twice keeps its first name: a parameter passed as an input stays
        a parameter.
        """
        names: dict[str, torch.Tensor] = dict(self.model.named_parameters())
        names.update(self.model.named_buffers())
        for name, tensor in unregistered_tensors(self.model).items():  # in plain lists, dicts: by attribute path
            names.setdefault(name, tensor)
        taken = {id(t) for t in names.values()}
        for name, tensor in self.input_names().items():
            if id(tensor) not in taken and name not in names:
                names[name] = tensor
                taken.add(id(tensor))
        return names

    def _where(self, error: BaseException) -> str:
        if self.path.suffix == ".py":
            return _user_frame(error, self.path)
        return self.source


def load_model(
    spec: "str | ModelSpec",
    *,
    input_shapes: Optional[Sequence[Shape]] = None,
    library_output: bool = False,
) -> LoadedModel:
    """Load any model form: a model file, a factory or a ``torch.export`` archive.

    ``input_shapes`` builds random float inputs of those shapes (one tensor per
    shape, positional) and takes the place of the model's own example inputs.

    Warnings and log records that torch or another library emits while the model
    loads (torch logs a whole traceback before it fails to read a corrupt archive)
    are kept, not printed: they come back as ``notes``, one line each, or in the
    error's message. ``library_output=True`` lets them print as they come (``--debug``).
    """
    if not isinstance(spec, ModelSpec):
        spec = parse_model_spec(os.fspath(spec))
    with _library_output_kept(not library_output) as said:
        try:
            loaded = _load_any(spec, input_shapes, said)
        except ModelFileError as error:
            if said.records or said.warnings:
                raise ModelFileError(f"{error} {said.hint()}") from error
            raise
    notes = said.notes(spec.text)
    return dataclasses.replace(loaded, notes=loaded.notes + notes) if notes else loaded


def _load_any(spec: ModelSpec, input_shapes: Optional[Sequence[Shape]], said: "_LibraryOutput") -> LoadedModel:
    if spec.kind == MODULE_FACTORY:
        assert spec.module is not None and spec.factory is not None
        return _load_module_factory(spec, input_shapes)
    assert spec.path is not None
    _check_readable(spec.path, spec.text)
    content = _sniff(spec.path)
    if content == "export" or (spec.kind == EXPORT_ARCHIVE and content != "pickle"):
        return _load_export_archive(spec, input_shapes, said)
    if content == "pickle" or spec.path.suffix.lower() in PICKLE_SUFFIXES:
        raise ModelFileError(_pickle_message(spec.path))
    if spec.kind == FILE_FACTORY:
        return _load_file_factory(spec, input_shapes)
    return load_model_file(spec.path, input_shapes=input_shapes)


def load_model_file(
    path: "str | os.PathLike[str]",
    *,
    input_shapes: Optional[Sequence[Shape]] = None,
) -> LoadedModel:
    """Import ``path`` as a fresh module (its folder importable) and read the convention.

    ``input_shapes``, when given, builds random inputs instead of ``example_inputs``
    (which the file then need not define).
    """
    file = Path(path)
    _check_readable(file, os.fspath(path))
    with _importable(str(file.resolve().parent)):
        namespace = _import_file(file)
        found = sorted(k for k in namespace if not k.startswith("_"))
        needed = ("model",) if input_shapes is not None else ("model", "example_inputs")
        missing = [k for k in needed if k not in namespace]
        if missing:
            raise ModelFileError(
                f"{file}: defines no {' and '.join(missing)}; {CONVENTION}. "
                f"It defines: {', '.join(found) or 'nothing'}."
            )
        model = _call_if_function(namespace["model"], file, "model")
        if not isinstance(model, torch.nn.Module):
            raise ModelFileError(
                f"{file}: `model` must be an nn.Module or a function returning one; got {type(model).__name__}."
            )
        if input_shapes is not None:
            inputs = random_inputs(input_shapes)
        else:
            inputs = _call_if_function(namespace["example_inputs"], file, "example_inputs")
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    loss = namespace.get("loss")
    if loss is not None and not callable(loss):
        raise ModelFileError(f"{file}: `loss` must be a function of the model output; got {type(loss).__name__}.")
    return LoadedModel(file, model, inputs, loss)


def random_inputs(shapes: Sequence[Shape], seed: int = 0) -> tuple[torch.Tensor, ...]:
    """One random float tensor per shape, the same on every run (the global RNG is untouched).

    >>> [tuple(t.shape) for t in random_inputs([(1, 3), (2,)])]
    [(1, 3), (2,)]
    """
    generator = torch.Generator().manual_seed(seed)
    inputs = []
    for shape in shapes:
        _check_allocatable(shape)
        try:
            inputs.append(torch.randn(tuple(shape), generator=generator))
        except (RuntimeError, MemoryError) as error:
            if isinstance(error, RuntimeError) and "alloc" not in str(error).lower():
                raise
            raise _too_large(shape, "the allocation failed") from None
    return tuple(inputs)


def _check_allocatable(shape: Shape) -> None:
    """Refuse, before allocating, an input larger than this machine's memory: torch
    would fail with an allocator message, or the kernel would let it be allocated
    and then kill the process while the random values are written."""
    memory = _physical_memory()
    if memory is not None and _input_bytes(shape) > memory:
        raise _too_large(shape, f"this machine has {memory / 1e9:.1f} GB of memory")


def _input_bytes(shape: Shape) -> int:
    elements = 1
    for size in shape:
        elements *= size
    return elements * torch.tensor([], dtype=torch.get_default_dtype()).element_size()


def _physical_memory() -> Optional[int]:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _too_large(shape: Shape, why: str) -> OptionError:
    bytes_needed = _input_bytes(shape)
    elements = bytes_needed // max(torch.tensor([], dtype=torch.get_default_dtype()).element_size(), 1)
    return OptionError(
        f"Input shape {','.join(str(size) for size in shape)} is too large to allocate: {elements:,} elements, "
        f"{bytes_needed / 1e9:,.1f} GB of {str(torch.get_default_dtype()).removeprefix('torch.')} ({why}); "
        "give a smaller shape (--input-shape)."
    )


# --- factories ---------------------------------------------------------------------


def _load_file_factory(spec: ModelSpec, input_shapes: Optional[Sequence[Shape]]) -> LoadedModel:
    assert spec.path is not None and spec.factory is not None
    file = spec.path
    with _importable(str(file.resolve().parent)):
        namespace = _import_file(file)
        factory = _find_factory(namespace, spec, lambda error: _user_frame(error, file))
        result = _call_factory(factory, spec, lambda error: _user_frame(error, file))
    return _from_factory_result(result, spec, file, input_shapes)


def _load_module_factory(spec: ModelSpec, input_shapes: Optional[Sequence[Shape]]) -> LoadedModel:
    assert spec.module is not None and spec.factory is not None
    # Like `python -m`: modules in the current folder are importable.
    with _importable(os.getcwd()):
        try:
            module = importlib.import_module(spec.module)
        except ModuleNotFoundError as error:
            if error.name and (spec.module == error.name or spec.module.startswith(error.name + ".")):
                raise ModelFileError(
                    f"{spec.text}: there is no module named {error.name!r} to import; run from the "
                    f"folder that holds it or add that folder to PYTHONPATH, or give the file's path "
                    f"(path/to/file.py:{spec.factory})."
                ) from error
            raise ModelFileError(
                f"{deepest_user_frame(error) or spec.text}: importing {spec.module} raised "
                f"{_raised(error)}"
            ) from error
        except USER_CODE_ERRORS as error:
            raise ModelFileError(
                f"{deepest_user_frame(error) or spec.text}: importing {spec.module} raised "
                f"{_raised(error)}"
            ) from error
        where = lambda error: deepest_user_frame(error) or spec.text  # noqa: E731
        factory = _find_factory(vars(module), spec, where)
        result = _call_factory(factory, spec, where)
    path = Path(getattr(module, "__file__", None) or spec.module.replace(".", "/"))
    if path.stem == "__init__":
        path = path.parent
    return _from_factory_result(result, spec, path, input_shapes)


def _find_factory(namespace: dict[str, Any], spec: ModelSpec, where: Callable[[BaseException], str]) -> Callable:
    assert spec.factory is not None
    value: Any = None
    found = True
    first, *rest = spec.factory.split(".")
    if first in namespace:
        value = namespace[first]
        for part in rest:  # Class.build
            if not hasattr(value, part):
                found = False
                break
            value = getattr(value, part)
    else:
        found = False
    if not found:
        callables = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_") and not inspect.ismodule(v))
        raise ModelFileError(
            f"{spec.text}: defines no {spec.factory!r}; name a function returning (model, example_inputs). "
            f"It defines: {', '.join(callables) or 'nothing callable'}."
        )
    if not callable(value):
        raise ModelFileError(
            f"{spec.text}: {spec.factory!r} is a {type(value).__name__}, not a function; "
            f"name a function returning (model, example_inputs)."
        )
    return value


def _call_factory(factory: Callable, spec: ModelSpec, where: Callable[[BaseException], str]) -> Any:
    if isinstance(factory, torch.nn.Module):  # a model itself, not a function that builds one
        return factory
    try:
        return factory()
    except USER_CODE_ERRORS as error:
        raise ModelFileError(f"{where(error)}: {spec.factory}() raised {_raised(error)}") from error


def _from_factory_result(
    result: Any, spec: ModelSpec, path: Path, input_shapes: Optional[Sequence[Shape]]
) -> LoadedModel:
    expected = f"{spec.factory}() must return (model, example_inputs) with model an nn.Module"
    if isinstance(result, torch.nn.Module):
        if input_shapes is None:
            raise ModelFileError(
                f"{spec.text}: {spec.factory} gives a model but no example inputs; return (model, example_inputs), "
                f"or give input shapes (--input-shape) to run it on random inputs."
            )
        model, inputs = result, None
    elif isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        model, inputs = result
    else:
        raise ModelFileError(f"{spec.text}: {expected}; got {_describe_result(result)}.")
    if input_shapes is not None:
        inputs = random_inputs(input_shapes)
    if isinstance(inputs, list):
        inputs = tuple(inputs)
    return LoadedModel(path, model, inputs, source=spec.text)


def _describe_result(result: Any) -> str:
    if isinstance(result, (tuple, list)):
        kinds = ", ".join(type(item).__name__ for item in result[:4])
        more = ", ..." if len(result) > 4 else ""
        return f"a {type(result).__name__} of {len(result)} ({kinds}{more})"
    return f"a {type(result).__name__}"


# --- torch.export archives and pickles ---------------------------------------------


def _load_export_archive(spec: ModelSpec, input_shapes: Optional[Sequence[Shape]], said: "_LibraryOutput") -> LoadedModel:
    assert spec.path is not None
    try:
        if spec.path.suffix.lower() == ".pt2":
            program = torch.export.load(spec.path)
        else:  # torch.export.load() wants the .pt2 suffix on a path, but takes any open file
            with open(spec.path, "rb") as archive:
                program = torch.export.load(archive)
    except Exception as error:
        # torch logs the real reason and raises one that points at "the warnings above".
        cause = said.logged_error() or error
        said.clear()
        raise ModelFileError(
            f"{spec.text}: torch.export.load() cannot read it ({type(cause).__name__}: {first_line(cause, type(cause).__name__)}); "
            f"save it again with torch.export.save(), or give {SUPPORTED_FORMS}."
        ) from error
    try:
        module = program.module()
    except Exception as error:
        raise ModelFileError(
            f"{spec.text}: the exported program cannot be turned into a module "
            f"({type(error).__name__}: {first_line(error, type(error).__name__)})."
        ) from error
    if input_shapes is not None:
        inputs: Any = random_inputs(input_shapes)
    else:
        inputs = _stored_example_inputs(program, module, spec)
    notes = _let_exported_parameters_require_grad(module, spec)
    return LoadedModel(spec.path, module, inputs, source=spec.text, notes=notes, exported=True)


def _stored_example_inputs(program: Any, module: torch.nn.Module, spec: ModelSpec) -> Any:
    stored = getattr(program, "example_inputs", None)
    if stored is None:
        raise ModelFileError(
            f"{spec.text}: the archive stores no example inputs; give input shapes (--input-shape) "
            f"matching the shapes it was exported with."
        )
    args, kwargs = stored
    if not kwargs:
        return tuple(args)
    if not args:
        return dict(kwargs)
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise ModelFileError(
            f"{spec.text}: its stored example inputs mix positional and keyword arguments that do not "
            f"fit the forward's signature ({error}); give input shapes (--input-shape) instead."
        ) from error
    return dict(bound.arguments)


def _let_exported_parameters_require_grad(module: torch.nn.Module, spec: ModelSpec) -> tuple[str, ...]:
    """Make an all-frozen exported module's parameters require grad; say so in a note.

    Programs are often exported for inference with every parameter frozen, and then
    there is no backward graph to draw at all. The module is a fresh one that
    ``ExportedProgram.module()`` built from the archive (nothing of the user's
    changes), and a partly frozen model keeps its flags, since there the frozen
    parts are the point of the picture.
    """
    parameters = [p for p in module.parameters() if p.is_floating_point() or p.is_complex()]
    if not parameters or any(p.requires_grad for p in parameters):
        return ()
    for parameter in parameters:
        parameter.requires_grad_(True)
    return (
        f"every parameter in {spec.text} is frozen (requires_grad=False), as in programs exported "
        f"for inference; drawing the graph as if they were trainable",
    )


def _sniff(path: Path) -> str:
    """'export', 'pickle' or 'other' from the file's first bytes (and zip listing)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError:
        return "other"
    if head[:1] and head[0] == _PICKLE_PROTOCOL:
        return "pickle"
    if head != _ZIP_MAGIC:
        return "other"
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError):
        return "other"
    if any(name.rpartition("/")[2] == "archive_format" for name in names):
        return "export"
    if any(name.rpartition("/")[2] == "data.pkl" for name in names):
        return "pickle"
    return "other"


def _pickle_message(path: Path) -> str:
    """Why a torch.save() file cannot be drawn, read with weights_only=True (which runs no code)."""
    supported = f"Give {SUPPORTED_FORMS} instead."
    try:
        torch.load(path, weights_only=True, map_location="cpu", mmap=True)
    except Exception as error:
        text = str(error)
        if "weights_only" not in text.lower() and "Weights only" not in text:
            return f"{path}: is not a model graphviz-autograd can load ({type(error).__name__}: {first_line(error, type(error).__name__)}). {supported}"
        pickled = re.search(r"GLOBAL ([\w.]+)", text)
        what = f" (it pickles {pickled.group(1)})" if pickled else ""
        return (
            f"{path}: is a pickled torch.save() file{what}; torch.load() reads with weights_only=True by "
            f"default and refuses pickled modules, and loading it with weights_only=False would run code "
            f"stored in the file, so graphviz-autograd does not. {supported}"
        )
    return (
        f"{path}: holds only tensors (a state_dict or weights), not a model with code to run. "
        f"{supported} A model file can build the model and call load_state_dict() on these weights."
    )


# --- what libraries say while a model loads ----------------------------------------


class _LibraryOutput:
    """The warnings and log records (WARNING and above) emitted while a model loads."""

    def __init__(self) -> None:
        self.records: list[logging.LogRecord] = []
        self.warnings: list[warnings.WarningMessage] = []

    def lines(self) -> list[str]:
        """One line each, said once: '<logger> logged: <message>', '<Category>: <message>'."""
        said = [f"{record.name} logged: {first_line(record.getMessage())}" for record in self.records]
        said += [f"{warning.category.__name__}: {first_line(warning.message)}" for warning in self.warnings]
        return list(dict.fromkeys(said))

    def notes(self, source: str) -> tuple[str, ...]:
        return tuple(f"{source}: while it was loaded, {line} (--debug shows it whole)" for line in self.lines())

    def hint(self) -> str:
        lines = self.lines()
        return f"While it was loaded, {lines[0]}{f' (and {len(lines) - 1} more)' if len(lines) > 1 else ''}; --debug shows it whole."

    def logged_error(self) -> Optional[BaseException]:
        """The exception the last log record carries (``logger.warning(..., exc_info=True)``), if one does."""
        for record in reversed(self.records):
            if record.exc_info and isinstance(record.exc_info[1], BaseException):
                return record.exc_info[1]
        return None

    def clear(self) -> None:
        self.records.clear()
        self.warnings.clear()


class _Keeping(logging.Handler):
    def __init__(self, said: _LibraryOutput) -> None:
        super().__init__(logging.WARNING)
        self.said = said

    def emit(self, record: logging.LogRecord) -> None:
        self.said.records.append(record)


@contextlib.contextmanager
def _library_output_kept(keep: bool = True) -> Iterator[_LibraryOutput]:
    """Keep, instead of printing, what libraries log and warn while the block runs.

    torch gives many of its loggers a handler of their own that writes to stderr and
    does not pass records up: each handler found is set aside for the block, and the
    root logger's too, where the loggers made meanwhile send theirs.
    """
    said = _LibraryOutput()
    if not keep:
        yield said
        return
    keeping = _Keeping(said)
    loggers = [logging.getLogger()] + [
        logger for logger in list(logging.Logger.manager.loggerDict.values())
        if isinstance(logger, logging.Logger) and logger.handlers
    ]
    handlers = [(logger, logger.handlers) for logger in loggers]
    for logger in loggers:
        logger.handlers = [keeping]
    try:
        with warnings.catch_warnings(record=True) as caught:
            said.warnings = caught
            yield said
    finally:
        for logger, kept in handlers:
            logger.handlers = kept


# --- importing user code -----------------------------------------------------------


@contextlib.contextmanager
def _importable(folder: str) -> Iterator[None]:
    """Put ``folder`` first on sys.path while the user's code is imported and its factories run."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def _check_readable(file: Path, given: str) -> None:
    if not file.exists():
        where = "" if file.is_absolute() else f" (relative paths start in {os.getcwd()})"
        raise ModelFileError(f"Model file {given!r} does not exist; check the path{where}.")
    if not file.is_file():
        raise ModelFileError(f"Model file {given!r} is not a file; give the path of a .py file.")
    try:
        with open(file, "rb") as handle:
            handle.read(1)
    except OSError as error:
        raise ModelFileError(
            f"Model file {given!r} cannot be read: {error.strerror or error}; check its permissions."
        ) from error


def _import_file(file: Path) -> dict[str, Any]:
    module_name = f"_graphviz_autograd_model_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ModelFileError(f"{file}: cannot be imported as Python; give {SUPPORTED_FORMS}.")
    module = importlib.util.module_from_spec(spec)
    # Registered as importing would: dataclasses and typing look classes' modules up here.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except USER_CODE_ERRORS as error:
        sys.modules.pop(module_name, None)
        raise ModelFileError(
            f"{_user_frame(error, file)}: importing the model file raised {_raised(error)}"
        ) from error
    return vars(module)


def _call_if_function(value: Any, file: Path, name: str) -> Any:
    if isinstance(value, torch.nn.Module) or not callable(value) or isinstance(value, torch.Tensor):
        return value
    try:
        return value()
    except USER_CODE_ERRORS as error:
        raise ModelFileError(f"{_user_frame(error, file)}: {name}() raised {_raised(error)}") from error


def _user_frame(error: BaseException, file: Path) -> str:
    """'file:line' of the deepest frame in the user's file, for messages."""
    if isinstance(error, SyntaxError) and error.lineno and error.filename and _same_file(error.filename, file):
        return f"{file}:{error.lineno}"
    where = str(file)
    resolved = str(file.resolve())
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.abspath(frame.filename) == resolved:
            where = f"{file}:{frame.lineno}"
    return where


def deepest_user_frame(error: BaseException) -> Optional[str]:
    """'file:line' of the deepest frame outside Python, installed packages and this package."""
    if isinstance(error, SyntaxError) and error.filename and error.lineno:
        return f"{error.filename}:{error.lineno}"
    library = {os.path.abspath(sysconfig.get_paths()[key]) for key in ("stdlib", "purelib", "platlib")}
    own = os.path.dirname(os.path.abspath(__file__))
    where = None
    for frame in traceback.extract_tb(error.__traceback__):
        filename = os.path.abspath(frame.filename)
        if frame.filename.startswith("<") or filename.startswith(own):
            continue
        if any(filename.startswith(folder + os.sep) for folder in library):
            continue
        where = f"{frame.filename}:{frame.lineno}"
    return where


def _same_file(name: str, file: Path) -> bool:
    return os.path.abspath(name) == str(file.resolve())


# --- naming inputs -----------------------------------------------------------------


def _positional_names(model: torch.nn.Module, count: int) -> list[str]:
    """Names of the first ``count`` positional arguments of ``model.forward``."""
    fallback = [f"input[{i}]" for i in range(count)]
    try:
        parameters = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return fallback
    names: list[str] = []
    for parameter in parameters:
        if len(names) == count:
            break
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
        elif parameter.kind == parameter.VAR_POSITIONAL:
            names.extend(f"{parameter.name}[{i}]" for i in range(count - len(names)))
    names.extend(fallback[len(names):])
    return names


def _describe_input_shapes(inputs: Any) -> str:
    """' on inputs of shape (1, 3), (2,)' when every input is a tensor; '' otherwise."""
    values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs) if isinstance(inputs, tuple) else [inputs]
    if not values or not all(isinstance(v, torch.Tensor) for v in values):
        return ""
    shapes = ", ".join("(" + ", ".join(str(s) for s in v.shape) + ")" for v in values)
    return f" on input{'s' if len(values) > 1 else ''} of shape {shapes}"


