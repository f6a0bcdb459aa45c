"""Identity and address helpers: placeholder serials / UUIDs are never identities; PCI ids normalise."""

from __future__ import annotations

import pytest

from inventory_agents.agent.util import (
    clean_serial,
    clean_uuid,
    normalize_pci_bus_id,
    parse_colon_blocks,
    parse_mib,
)


@pytest.mark.parametrize(
    "raw",
    [
        "N/A",
        "[N/A]",
        "NA",
        "Not Supported",
        "[Not Supported]",
        "0000000000000",
        "xxx",
        "XXXX",
        "***",
        "",
        "  ",
        "REDACTED",
        "TPXxxxx",
        "To Be Filled By O.E.M.",
        "Default string",
        "Not Specified",
        "ab\x00cd",
        "FFFFFFFF",
        "12##34",
        "0123456789",
    ],
)
def test_placeholder_serials(raw):
    serial, serial_raw = clean_serial(raw)
    assert serial is None
    assert serial_raw == raw.strip()


@pytest.mark.parametrize(
    "raw",
    [
        "1650522003820",
        "0324418086185",
        "2106030737ZERC004118",
        "S212101X7A18218",
        "4242",
        "TPD31A2404150027",
        "1025C9048791",
    ],
)
def test_real_serials(raw):
    assert clean_serial(raw) == (raw, raw)


def test_absent_serial_has_no_raw_text():
    assert clean_serial(None) == (None, None)


@pytest.mark.parametrize(
    "raw",
    [
        "GPU-00000000-0000-0000-0000-000000000000",
        "GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
        "N/A",
        "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
        "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff",
        "not-a-uuid",
    ],
)
def test_placeholder_uuids(raw):
    assert clean_uuid(raw) == (None, raw)


@pytest.mark.parametrize(
    "raw",
    [
        "GPU-513536b6-7d19-9063-b049-1e69664bb298",
        "GPU-e77ce5d8-8b63-c936-3c1b-839d45bcd0f2",
        "7100fa8866904061",
        "0x3b1f6c2e9a7d0541",
        "MIG-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901",
    ],
)
def test_real_uuids(raw):
    assert clean_uuid(raw) == (raw, raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("0000:3b:00", "0000:3b:00.0"),
        ("PCI:0000:3b:00", "0000:3b:00.0"),
        ("3b:00.0", "0000:3b:00.0"),
        ("0001:C1:00.1", "0001:c1:00.1"),
        ("garbage", None),
        ("", None),
        (None, None),
    ],
)
def test_pci_bus_ids(raw, expected):
    assert normalize_pci_bus_id(raw) == expected


@pytest.mark.parametrize(
    ("raw", "mib"),
    [("81920 MiB", 81920), ("32 GB", 32768), ("65520", 65520), ("68702699520 B", 65520), ("[N/A]", None)],
)
def test_memory_sizes(raw, mib):
    assert parse_mib(raw) == mib


def test_colon_blocks_split_on_blank_lines_and_repeated_keys():
    text = "NPU ID : 0\nChip Count : 2\n\nHealth Status : OK\nChip ID : 0\nHealth Status : Alarm\nChip ID : 1\n"
    assert parse_colon_blocks(text) == [
        {"NPU ID": "0", "Chip Count": "2"},
        {"Health Status": "OK", "Chip ID": "0"},
        {"Health Status": "Alarm", "Chip ID": "1"},
    ]
