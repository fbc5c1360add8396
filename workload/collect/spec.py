"""What a ``--model MODULE:CALLABLE`` callable returns, and how it is found.

The callable takes the batch size and returns a :class:`ModelSpec`, or a tuple
``(module, example_input)`` / ``(module, example_input, target)``. This module
does not import torch; the objects inside are torch's.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from workload.collect.errors import ModelSpecError

LOSSES = ("cross_entropy", "mse")
OPTIMIZERS = ("adam", "adamw", "sgd")


@dataclass
class ModelSpec:
    """A model to profile for one training step.

    model: an ``nn.Module``. example_input: a tensor, or a tuple of tensors passed
    as positional arguments, with the batch as first dimension. target: the
    labels; made up when None (class ids for cross-entropy, random values for
    MSE). loss: ``"cross_entropy"``, ``"mse"`` or a callable ``(output, target)
    -> scalar``. optimizer: ``"adam"``, ``"adamw"``, ``"sgd"`` or a callable
    ``(parameters) -> torch.optim.Optimizer``. None means the command line's
    choice, else cross-entropy and Adam.
    """

    model: Any
    example_input: Any
    target: Any = None
    loss: str | Callable | None = None
    optimizer: str | Callable | None = None


def load_model_spec(ref: str, batch_size: int) -> ModelSpec:
    """Import ``MODULE:CALLABLE``, call it with batch_size, and return a ModelSpec."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ModelSpecError(None, "--model", f"expected MODULE:CALLABLE, e.g. "
                             f"workload.collect.models:mlp, got {ref!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelSpecError(None, "--model", f"cannot import module {module_name!r}: {exc}") from None
    target = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ModelSpecError(None, "--model", f"module {module_name!r} has no {attr!r}")
        target = getattr(target, part)
    if not callable(target):
        raise ModelSpecError(None, "--model", f"{ref} is not callable")
    made = target(batch_size)
    if isinstance(made, ModelSpec):
        return made
    if isinstance(made, tuple) and len(made) in (2, 3):
        return ModelSpec(*made)
    raise ModelSpecError(None, "--model", f"{ref}({batch_size}) returned {type(made).__name__}; "
                         "expected a ModelSpec or a tuple (module, example_input[, target])")
