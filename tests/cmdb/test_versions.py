"""Version comparison on the strings firmware and drivers really carry."""

from __future__ import annotations

import pytest

from cmdb.versions import version_clean, version_compare, version_key


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("96.00.89.00.01", "96.00.9A.00.01"),  # VBIOS bytes are hex
        ("90.16.25.00.4C", "90.16.25.00.4D"),
        ("1.0.0-rc2", "1.0.0"),
        ("1.0.0-rc1", "1.0.0-rc2"),
        ("24.1.rc1", "24.1.0"),
        ("22.39.1002", "22.41.1000"),
        ("2.1.6 (MT_0000000838)", "2.1.7"),
        ("1.2", "1.2.1"),
        ("2.0a", "2.0.1"),
        ("P70", "P71"),
        ("G506.0212.00.01", "G506.0220.00.01"),
        ("535.54.03", "550.127.05"),
        ("7.1.0.7.220", "7.1.0.11.220"),
    ],
)
def test_order(older, newer):
    assert version_compare(older, newer) == -1
    assert version_compare(newer, older) == 1


@pytest.mark.parametrize(
    ("a", "b"),
    [("2.1.6 (MT_0000000838)", "2.1.6"), ("8.70 0x8000d3e9 1.3295.0", "8.70"), ("22.39.1002", " 22.39.1002 ")],
)
def test_equal(a, b):
    assert version_compare(a, b) == 0


@pytest.mark.parametrize("raw", ["", None, "N/A", "unknown", "[REDACTED]", "x" * 101, "1" * 101])
def test_unparsable_is_none(raw):
    assert version_key(raw) is None
    assert version_compare(raw, "1.0") is None


def test_clean_drops_suffixes():
    assert version_clean("2.1.6 (MT_0000000838)") == "2.1.6"
    assert version_clean("8.70 0x8000d3e9 1.3295.0") == "8.70"
