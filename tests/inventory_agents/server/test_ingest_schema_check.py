"""The fast schema check agrees with jsonschema (it must never accept what jsonschema rejects)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from inventory_agents.services.schema_check import Unsupported, schema_compile
from inventory_agents.services.validation import FALLBACK_SCHEMA, SCHEMA_DIR
from tests.inventory_agents.server.ingest_support import card_entry

SCHEMA = (
    json.loads((SCHEMA_DIR / "agent-report-v1.json").read_text())
    if (SCHEMA_DIR / "agent-report-v1.json").exists()
    else FALLBACK_SCHEMA
)


def _valid_report() -> dict[str, Any]:
    cards = [card_entry(i, f"1654{i:08d}") for i in range(3)]
    cards[1]["health"].update(
        ecc_volatile_dbe=0, remapped_rows_pending=False, health_raw="OK", error_codes=["1"], ecc_hbm_dbe=0
    )
    cards[2]["health"]["xid_events"] = [
        {
            "xid": 79,
            "pci_bus_id": "0000:a2:00.0",
            "message": "off the bus",
            "occurred_at": "2026-11-29T10:00:00Z",
            "pid": None,
        }
    ]
    return {
        "schema": "gpuops.agent-report/1",
        "collected_at": "2026-11-29T10:00:00Z",
        "agent_version": "1.0.0",
        "hostname": "gpu-0001",
        "system": {
            k: None
            for k in (
                "vendor",
                "product",
                "serial",
                "serial_raw",
                "bios_version",
                "os_name",
                "os_version",
                "kernel",
                "cpu_model",
                "cpu_count",
                "memory_gib",
            )
        },
        "accelerators": cards,
        "nics": [
            {
                "name": "eno1",
                "mac": "aa:bb:cc:dd:ee:ff",
                "speed_mbps": 25000,
                "state": "up",
                "kind": "physical",
                "pci_bus_id": "0000:31:00.0",
            }
        ],
        "infiniband": [
            {
                "ca": "mlx5_0",
                "node_guid": "0x0000000000000001",
                "firmware": None,
                "ports": [
                    {
                        "port": 1,
                        "state": "active",
                        "phys_state": "linkup",
                        "rate_gbps": 400,
                        "port_guid": "0x0000000000000002",
                        "link_layer": "infiniband",
                        "lid": 7,
                    }
                ],
            }
        ],
        "lldp_neighbors": [],
        "software": [{"component": "nvidia-driver", "version": "550.127.05"}],
        "collector_errors": [{"collector": "lldp", "error": "lldpctl not installed"}],
    }


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for key, value in doc.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            out += _paths(value, (*prefix, i))
    return out


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=2**40)
    | st.floats(allow_nan=False, width=32)
    | st.sampled_from(
        [
            "",
            "x",
            "0000:3b:00.0",
            "0x0000000000000001",
            "ok",
            "failed",
            "nvidia",
            "2026-11-29T10:00:00Z",
            "gpuops.agent-report/1",
            "physical",
            "ABC",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["xid", "pci_bus_id", "message", "status", "name", "extra", "ecc_hbm_dbe"]),
            children,
            max_size=3,
        )
    ),
    max_leaves=5,
)
BASE = _valid_report()
ALL_PATHS = _paths(BASE)
JSONSCHEMA = Draft202012Validator(SCHEMA)
FAST = schema_compile(SCHEMA)


def _set(doc: Any, path: tuple, value: Any) -> None:
    if not path:
        return
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


def test_the_valid_report_is_valid_for_both():
    assert JSONSCHEMA.is_valid(BASE) and FAST(BASE)


@settings(max_examples=600, deadline=None)
@given(
    edits=st.lists(st.tuples(st.sampled_from(ALL_PATHS), JSON_VALUES), min_size=1, max_size=3),
    drops=st.lists(st.sampled_from([p for p in ALL_PATHS if p and isinstance(p[-1], str)]), max_size=2),
)
def test_fast_check_agrees_with_jsonschema(edits, drops):
    doc = copy.deepcopy(BASE)
    for path, value in edits:
        try:
            _set(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced a parent
    for path in drops:
        try:
            target = doc
            for part in path[:-1]:
                target = target[part]
            del target[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue
    assert FAST(doc) == JSONSCHEMA.is_valid(doc)


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        ({"type": "integer"}, 1.0, True),
        ({"enum": [None, "enabled"]}, None, False),
        ({"const": 1}, 1.0, True),
        (
            {"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": False},
            {"ab": 1},
            {"b": 1},
        ),
        ({"minimum": 0}, "not a number", -1),
        ({"items": {"type": "string"}, "maxItems": 2}, ["a"], ["a", "b", "c"]),
    ],
)
def test_keyword_semantics(schema, good, bad):
    fast = schema_compile(schema)
    assert fast(good) and Draft202012Validator(schema).is_valid(good)
    assert not fast(bad) and not Draft202012Validator(schema).is_valid(bad)


def test_unknown_keywords_are_refused_not_guessed():
    with pytest.raises(Unsupported):
        schema_compile({"type": "object", "dependentRequired": {"a": ["b"]}})
    with pytest.raises(Unsupported):
        schema_compile({"$ref": "other.json#/x"})


def test_schema_file_is_compiled():
    assert Path(SCHEMA_DIR / "agent-report-v1.json").exists()
