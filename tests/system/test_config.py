"""System config: ASTRA-sim's JSON unchanged, YAML with the same keys, warnings and errors."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from system.config import CollectiveOptimization, ImplType, SchedulingPolicy, SystemConfig
from system.errors import SystemConfigError


def test_every_anchor_system_config_loads(anchors: Path) -> None:
    files = sorted((anchors / "system").rglob("*.json"))
    assert len(files) > 20
    for f in files:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cfg = SystemConfig.from_file(f)
        assert cfg.preferred_dataset_splits >= 1


def test_yaml_equals_json(anchors: Path, tmp_path: Path) -> None:
    src = anchors / "system/examples/native_collectives/HGX-H100-validated.json"
    y = tmp_path / "s.yaml"
    y.write_text(yaml.safe_dump(json.loads(src.read_text())))
    a, b = SystemConfig.from_file(src), SystemConfig.from_file(y)
    assert (a.active_chunks_per_dimension, a.local_mem_bw_gb_s, a.implementations) == \
           (b.active_chunks_per_dimension, b.local_mem_bw_gb_s, b.implementations)
    assert a.scheduling_policy is SchedulingPolicy.LIFO
    assert a.collective_optimization is CollectiveOptimization.LOCAL_BW_AWARE


def test_unknown_keys_warn_by_name() -> None:
    with pytest.warns(UserWarning, match="bogus-knob"):
        SystemConfig.from_dict({"preferred-dataset-splits": 4, "bogus-knob": 1}, "s.json")


@pytest.mark.parametrize("data,fragment", [
    ({"preferred-dataset-splits": 4, "endpoint-delay": "ten"}, "endpoint-delay"),
    ({"preferred-dataset-splits": 0}, "preferred-dataset-splits"),
    ({}, "required"),
    ({"preferred-dataset-splits": 4, "scheduling-policy": "RANDOM"}, "'LIFO'"),
    ({"preferred-dataset-splits": 4, "all-reduce-implementation": ["ringg"]}, "unknown implementation 'ringg'"),
    ({"preferred-dataset-splits": 4, "all-reduce-implementation": "direct0"}, "direct"),
    ({"preferred-dataset-splits": 4, "active-chunks-per-dimension": True}, "integer"),
])
def test_wrong_values_are_errors(data: dict, fragment: str) -> None:
    with pytest.raises(SystemConfigError) as e:
        SystemConfig.from_dict(data, "s.json")
    assert "s.json" in str(e.value) and fragment in str(e.value)


def test_implementation_names() -> None:
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 1, "all-to-all-implementation": ["direct8", "oneDirect"],
                                  "all-reduce-implementation": ["oneHalvingDoubling"]})
    d8, od = cfg.impls_for("all-to-all")
    assert (d8.type, d8.window, od.type, od.window) == (ImplType.DIRECT, 8, ImplType.ONE_DIRECT, -1)
    assert cfg.impls_for("all-reduce")[0].type.is_one


def test_injection_scale_multiplies_endpoint_delay() -> None:
    cfg = SystemConfig.from_dict({"preferred-dataset-splits": 1, "endpoint-delay": 10}, None, injection_scale=2.5)
    assert cfg.endpoint_delay_ns == 25


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(["direct", "oneDirect"]),
       st.lists(st.sampled_from(["0", "1", "7", "٣", "²", "１", "a", " ", "\n", "-", "99999", "123456"]), max_size=4)
       .map("".join))
def test_a_direct_window_is_read_as_the_regular_expression_read_it(kind: str, rest: str) -> None:
    """direct<N>: N is what re.fullmatch(r"\\d{1,5}") accepted, above 0; anything else is bad input."""
    import re

    from system.config import CollectiveImpl

    expected = -1 if rest == "" else int(rest) if re.fullmatch(r"\d{1,5}", rest) and int(rest) > 0 else None
    try:
        got = CollectiveImpl.parse(kind + rest, "sys.json", "all-to-all-implementation")
    except SystemConfigError:
        assert expected is None
        return
    assert got.type is ImplType(kind) and got.window == expected
