"""Named constants that behave as ``enum.Enum`` and ``enum.IntEnum`` members, without the enum module.

Every run used to import ``enum`` (and ``re``, which needs it) for seven small classes of
choices: a topology's kind, a collective's type, an implementation, a ring's direction, a
policy, an exit code. That was ~6% of a 64-rank run's start-up: importing ``enum`` is ~17 M
instructions and each Enum class ~1 M more, where a class of these is ~0.15 M.

``Choice`` keeps what the simulator and its users ask of an Enum: members are the class's own
instances, singletons, in definition order; ``Kind(value)`` and ``Kind[name]`` look them up with
Enum's errors; ``.name``, ``.value``, ``repr``, ``str``, ``format``, iteration, ``len``,
``__members__``, pickling and copying are Enum's. ``IntChoice`` members are also ints, as
IntEnum's are (C code reads them as ints). A name whose value is a function, property or other
descriptor, or that is a dunder, sunder or private name, is not a member, as in Enum.
tests/network/test_choices.py compares both with enum on the same class bodies.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without importing typing at run time (tests/cli/test_startup.py)
if TYPE_CHECKING:
    from typing import Any, Iterator


def _is_member(cls_name: str, key: str, value: Any) -> bool:
    """Enum's rule: not a dunder (``__x__``), sunder (``_x_``) or private (``_Cls__x``) name, not a
    function, property or other descriptor, not a nested class."""
    if len(key) > 2 and key[0] == key[-1] == "_" and (key[1] != "_") == (key[-2] != "_"):
        return False  # __x__ or _x_
    if key.startswith(f"_{cls_name.lstrip('_')}__"):
        return False
    return not hasattr(value, "__get__") and not isinstance(value, type)


class ChoiceType(type):
    """The class of Choice classes: builds the members from the class body."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> ChoiceType:
        values = {k: v for k, v in ns.items() if _is_member(name, k, v)}
        for k in values:
            del ns[k]
        if not any(issubclass(b, int) for b in bases):
            ns.setdefault("__slots__", ())  # a member holds its name and value only
        cls = super().__new__(mcs, name, bases, ns)
        members: dict[str, Any] = {}  # name → member, aliases included (Enum's __members__)
        by_value: dict[Any, Any] = {}
        make = cls._make_member
        for k, v in values.items():
            member = by_value.get(v)
            if member is None:  # a value given twice names one member twice (an Enum alias)
                member = make(k, v)
                by_value[v] = member
            members[k] = member
            type.__setattr__(cls, k, member)
        type.__setattr__(cls, "_members", members)
        type.__setattr__(cls, "_by_value", by_value)
        type.__setattr__(cls, "_order", tuple(by_value.values()))
        return cls

    def __call__(cls, value: Any) -> Any:
        if type(value) is cls:
            return value
        try:
            return cls._by_value[value]
        except (KeyError, TypeError):
            raise ValueError(f"{value!r} is not a valid {cls.__qualname__}") from None

    def __getitem__(cls, name: str) -> Any:
        return cls._members[name]

    def __iter__(cls) -> Iterator[Any]:
        return iter(cls._order)

    def __reversed__(cls) -> Iterator[Any]:
        return reversed(cls._order)

    def __len__(cls) -> int:
        return len(cls._order)

    def __contains__(cls, member: Any) -> bool:
        return type(member) is cls and member in cls._order

    def __setattr__(cls, name: str, value: Any) -> None:
        if name in cls.__dict__.get("_members", ()):
            raise AttributeError(f"cannot reassign member {name!r}")
        super().__setattr__(name, value)

    def __delattr__(cls, name: str) -> None:
        if name in cls.__dict__.get("_members", ()):
            raise AttributeError(f"cannot delete member {name!r}")
        super().__delattr__(name)

    @property
    def __members__(cls) -> dict[str, Any]:
        return dict(cls._members)


class Choice(metaclass=ChoiceType):
    """An Enum member: identity for equality and hashing."""

    __slots__ = ("name", "value")
    _members: dict[str, Any]
    _by_value: dict[Any, Any]
    _order: tuple[Any, ...]

    @classmethod
    def _make_member(cls, name: str, value: Any) -> Any:
        member = object.__new__(cls)
        object.__setattr__(member, "name", name)
        object.__setattr__(member, "value", value)
        return member

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {self.value!r}>"

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return type(self), (self.value,)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} members cannot be changed")


class IntChoice(int, metaclass=ChoiceType):
    """An IntEnum member: an int (equality, hashing, arithmetic and C code see the number), that
    prints as IntEnum's do (``str`` and ``format`` give the number)."""

    _members: dict[str, Any]
    _by_value: dict[Any, Any]
    _order: tuple[Any, ...]

    @classmethod
    def _make_member(cls, name: str, value: Any) -> Any:
        member = int.__new__(cls, value)
        member.__dict__.update(name=name, value=int(value))
        return member

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)!r}>"

    __str__ = int.__repr__
    __format__ = int.__format__

    def __reduce_ex__(self, protocol: Any) -> Any:
        return type(self), (int(self),)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self
