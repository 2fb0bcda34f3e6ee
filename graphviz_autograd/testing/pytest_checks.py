"""Assert in a test that a model learns: the ``autograd_check`` fixture of the pytest plugin.

::

    def test_every_parameter_learns(autograd_check):
        model = MLP()
        with record(model) as rec:
            loss = model(torch.randn(2, 4)).pow(2).mean()
        autograd_check(loss, model, recorder=rec)

fails the test, listing the findings, when :func:`graphviz_autograd.check`
finds a warning or an error: a parameter the loss never reaches, a ``detach()``
or ``no_grad()`` that leaves layers without gradient, a leaf kept in a plain
list, a gradient that is zero, NaN or far from the others. ``fail_on="error"``
tolerates warnings; ``fail_on="info"`` tolerates nothing.

Like the golden-file fixture, importing this module imports no torch.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

DEFAULT_FAIL_ON = "warning"


class AutogradCheck:
    """Runs :func:`graphviz_autograd.check` and fails the test on findings at or above ``fail_on``."""

    def __call__(
        self,
        outputs: Any,
        model: Any = None,
        *,
        recorder: Any = None,
        fail_on: str = DEFAULT_FAIL_ON,
        backward: Optional[bool] = None,
        **check_options: Any,
    ) -> list:
        """Check ``outputs`` (the loss) and ``model``; return the findings, or fail the test.

        ``backward`` (default: when ``outputs`` is one scalar tensor) computes the
        gradients with ``torch.autograd.grad``, leaving every ``.grad`` as it was.
        Other options (``params``, ``inputs``, ``top_memory``, ``outlier_decades``)
        go to ``check``.
        """
        import torch

        from ..checks.diagnosis import check
        from ..errors import CheckFailedError

        if backward is None:
            backward = isinstance(outputs, torch.Tensor) and outputs.numel() == 1 and outputs.requires_grad
        check_options.setdefault("top_memory", 0)  # memory is no reason to fail a test
        try:
            return check(outputs, model, recorder=recorder, backward=backward, fail_on=fail_on, **check_options)
        except CheckFailedError as error:
            pytest.fail(str(error), pytrace=False)


@pytest.fixture
def autograd_check() -> AutogradCheck:
    """Fail the test when ``check()`` finds a reason the model would not learn (see :class:`AutogradCheck`)."""
    return AutogradCheck()
