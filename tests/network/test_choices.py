"""network.choices against the enum module: the same class bodies, the same answers."""
from __future__ import annotations

import copy
import enum
import pickle

import pytest

from network.choices import Choice, IntChoice


def _bodies(base: type, int_base: type) -> tuple[type, type]:
    class Kind(base):  # type: ignore[misc, valid-type]
        RING = "Ring"
        SWITCH = "Switch"
        ALSO_RING = "Ring"  # an alias
        _single = "a member, as in Enum"

        @property
        def lower(self) -> str:
            return self.value.lower()

        def describe(self) -> str:
            return f"kind {self.name}"

    class Code(int_base):  # type: ignore[misc, valid-type]
        OK = 0
        BAD = 2
        STUCK = 3

        @property
        def bad(self) -> bool:
            return self != 0

    return Kind, Code


# pickle finds the classes by their module names
EKind, ECode = _bodies(enum.Enum, enum.IntEnum)
CKind, CCode = _bodies(Choice, IntChoice)
for _cls, _name in ((EKind, "EKind"), (ECode, "ECode"), (CKind, "CKind"), (CCode, "CCode")):
    _cls.__qualname__ = _cls.__name__ = _name


def _norm(text: str) -> str:
    return text.replace("EKind", "Kind").replace("CKind", "Kind").replace("ECode", "Code").replace("CCode", "Code")


def _outcome(f: object) -> object:
    try:
        return ("ok", f())  # type: ignore[operator]
    except Exception as e:  # noqa: BLE001 (the type and message are what is compared)
        return (type(e).__name__, _norm(str(e)))


def _views(kind: type, code: type) -> dict[str, object]:
    return {
        "names": [m.name for m in kind], "values": [m.value for m in kind], "len": len(kind),
        "members": {k: v.name for k, v in kind.__members__.items()},
        "alias is": kind.ALSO_RING is kind.RING, "by value": _outcome(lambda: kind("Switch").name),
        "member to itself": kind(kind.SWITCH) is kind.SWITCH,
        "bad value": _outcome(lambda: kind("ring")), "unhashable": _outcome(lambda: kind([1])),
        "by name": _outcome(lambda: kind["SWITCH"].name), "bad name": _outcome(lambda: kind["Ring"]),
        "repr": _norm(repr(kind.RING)), "str": _norm(str(kind.RING)), "format": _norm(f"{kind.SWITCH:>20}|"),
        "property": kind.SWITCH.lower, "method": kind.RING.describe(), "single underscore": _norm(repr(kind._single)),
        "equal self": kind.RING == kind.RING, "equal value": kind.RING == "Ring", "bool": bool(kind.RING),
        "set name": _outcome(lambda: setattr(kind.RING, "name", "x"))[0],  # the type: Enum's words name Enum
        "reassign": _outcome(lambda: setattr(kind, "RING", 1)), "isinstance": isinstance(kind.RING, kind),
        "int names": [m.name for m in code], "int values": [m.value for m in code],
        "int equal": (code.OK == 0, code.BAD == 2, code.BAD < code.STUCK, code.STUCK + 1, int(code.BAD)),
        "int hash": {0: "zero"}.get(code.OK), "int bool": (bool(code.OK), bool(code.BAD)),
        "int by value": code(2).name, "int bad": _outcome(lambda: code(5)),
        "int repr": _norm(repr(code.BAD)), "int str": str(code.BAD), "int format": f"{code.STUCK:03d}|{code.BAD}",
        "int property": (code.OK.bad, code.BAD.bad), "int isinstance": isinstance(code.OK, int),
        "reversed": [m.name for m in reversed(kind)],
    }


def test_a_choice_answers_as_an_enum_does() -> None:
    ours, theirs = _views(CKind, CCode), _views(EKind, ECode)
    for key in theirs:
        assert ours[key] == theirs[key], key


@pytest.mark.parametrize("member", [CKind.RING, CKind.SWITCH, CCode.OK, CCode.STUCK])
def test_members_stay_singletons_through_pickle_and_copy(member: object) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(member, protocol)) is member
    assert copy.copy(member) is member and copy.deepcopy([member])[0] is member


def test_the_simulators_choices_are_choices() -> None:
    """The classes a run uses: their members are as their enum versions were."""
    from network.topology import TopologyKind
    from system.collective.algorithm import ComType
    from system.config import ImplType
    from system.logical_topology import Direction
    from system.main import ExitCode

    assert [(m.name, m.value) for m in TopologyKind] == [("RING", "Ring"), ("FULLY_CONNECTED", "FullyConnected"),
                                                         ("SWITCH", "Switch")]
    assert ComType.ALL_TO_ALL == 6 and ComType(7) is ComType.REDUCE_SCATTER
    assert ComType.ALL_GATHER.config_name == "all-gather"
    assert ImplType("halvingDoubling") is ImplType.HALVING_DOUBLING and ImplType.ONE_RING.is_one
    assert Direction.ANTICLOCKWISE.value == 1 and ExitCode.STUCK == 3
    assert {TopologyKind.RING: 1}[TopologyKind.RING] == 1 and hash(ImplType.RING) == hash(ImplType.RING)
