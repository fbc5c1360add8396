"""network/records.py's ``@record`` makes the named tuple ``class X(NamedTuple)`` would make."""
from __future__ import annotations

from typing import NamedTuple

import pytest

from network.records import record


class Typed(NamedTuple):
    """A parsed thing."""

    kind: str
    size: int = 4
    note: str | None = None

    @property
    def double(self) -> int:
        return 2 * self.size

    @classmethod
    def parse(cls, text: str) -> "Typed":
        kind, size = text.split(":")
        return cls(kind, int(size))

    def __str__(self) -> str:
        return f"{self.kind}/{self.size}"


@record
class Light:
    """A parsed thing."""

    kind: str
    size: int = 4
    note: str | None = None

    @property
    def double(self) -> int:
        return 2 * self.size

    @classmethod
    def parse(cls, text: str) -> "Light":
        kind, size = text.split(":")
        return cls(kind, int(size))

    def __str__(self) -> str:
        return f"{self.kind}/{self.size}"


@pytest.mark.parametrize("args, kwargs", [(("ring",), {}), (("ring", 8), {}), (("a", 1, "n"), {}),
                                          ((), {"kind": "k", "note": "x"})])
def test_a_record_behaves_as_the_named_tuple(args: tuple, kwargs: dict) -> None:
    t, r = Typed(*args, **kwargs), Light(*args, **kwargs)
    assert tuple(t) == tuple(r) and r == t and hash(r) == hash(t) and isinstance(r, tuple)
    assert Light._fields == Typed._fields and Light._field_defaults == Typed._field_defaults
    assert r._asdict() == t._asdict() and r._replace(size=9) == t._replace(size=9)
    assert type(r._replace(size=9)) is Light and type(Light._make(tuple(t))) is Light
    assert r.double == t.double and str(r) == str(t) and repr(r).replace("Light", "Typed") == repr(t)
    assert Light.parse("x:3") == Typed.parse("x:3") and type(Light.parse("x:3")) is Light
    # the annotations as written; typing compiles each into a ForwardRef (the cost @record saves)
    assert Light.__doc__ == Typed.__doc__ and Light.__annotations__ == {"kind": "str", "size": "int", "note": "str | None"}
    assert {k: v.__forward_arg__ for k, v in Typed.__annotations__.items()} == Light.__annotations__
    assert Light.__module__ == __name__ and Light.__qualname__ == "Light"
    with pytest.raises(AttributeError):
        r.size = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        Light()  # type: ignore[call-arg]


def test_what_a_record_cannot_be_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):
        @record
        class Bad:
            a: int = 1
            b: int

    with pytest.raises(TypeError, match="super"):
        @record
        class Calls:
            a: int

            def __repr__(self) -> str:
                return super().__repr__()
