"""``@record``: a ``typing.NamedTuple`` class body made into a named tuple at a quarter of the cost.

``class X(NamedTuple)`` in a module with ``from __future__ import annotations`` compiles every
field's annotation string into a ``typing.ForwardRef`` when the class is made (0.3-0.9 ms a class;
a plain run makes eight of them, 3.9 ms of its start-up). ``@record`` reads the same class body
(fields in order with their annotations, defaults, methods, properties, class methods, the
docstring) and makes ``collections.namedtuple``'s class from it: the same tuple, fields, defaults,
``_replace``, ``_asdict``, equality and hashing; the annotations are kept as written, unevaluated.

Not supported (a TypeError says so): ``super()`` or ``__class__`` in a method (they would name the
class body, not the tuple) and a field without a default after one with a default.
"""
from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")
_SKIPPED = frozenset({"__dict__", "__weakref__", "__annotations__", "__module__", "__qualname__", "__doc__"})


def record(body: type[T]) -> type[T]:
    """The named tuple that ``class X(NamedTuple)`` with this body would be."""
    annotations = body.__dict__.get("__annotations__", {})
    fields = tuple(annotations)
    defaults = []
    for name in fields:
        if name in body.__dict__:
            defaults.append(body.__dict__[name])
        elif defaults:
            raise TypeError(f"{body.__qualname__}: field {name!r} without a default follows one with a default")
    cls = namedtuple(body.__name__, fields, defaults=defaults or None, module=body.__module__)
    for name, value in body.__dict__.items():
        if name in fields or name in _SKIPPED:
            continue
        function = getattr(value, "__func__", getattr(value, "fget", value))
        if "__class__" in getattr(getattr(function, "__code__", None), "co_freevars", ()):
            raise TypeError(f"{body.__qualname__}.{name} uses super() or __class__, which would name the class body")
        setattr(cls, name, value)
    cls.__qualname__ = body.__qualname__
    cls.__doc__ = body.__doc__ or cls.__doc__
    cls.__annotations__ = dict(annotations)
    return cls  # type: ignore[return-value]
