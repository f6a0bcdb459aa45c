"""Hygon DCUs from `rocm-smi ... --json` and/or `hy-smi` text (the DTK tools).

rocm-smi --json gives one object per card ("card0": {"Card Series": ..., "Serial Number": ...}) plus a
"system" object for the driver version; hy-smi prints a summary table (DCU Temp AvgPwr Perf PwrCap VRAM% DCU%
Mode) and, when asked with --show* flags, rocm-smi style "DCU[0] : Card Series: Z100SM" lines. Both are merged
by card index; the JSON wins for identity fields. Key names differ in case between versions, so keys are
compared lower-cased.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional

from ..runner import Source, ToolError
from ..util import (
    clean_serial,
    clean_uuid,
    is_masked_text,
    normalize_pci_bus_id,
    parse_float,
    parse_int,
    parse_mib,
    text_or_none,
)
from . import Fragment

JSON_NAME = "rocm-smi.json"
TEXT_NAME = "hy-smi.txt"
HYGON_PCI_VENDOR = "1d94"
_DETAIL_RE = re.compile(r"^\s*(?:DCU|GPU|HCU)\[(\d+)\]\s*:\s*([^:]+?)\s*:\s*(.*?)\s*$")
_DRIVER_RE = re.compile(r"(?im)^\s*driver version\s*:\s*(\S+)")


def parse_rocm_json(text: str) -> Dict[str, Any]:
    """{'cards': {index: {lower-cased key: value}}, 'driver_version': str|None}."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        # DTK builds print a colored "hygon module is loaded" line before the JSON: parse from the first brace.
        start, end = text.find("{"), text.rfind("}")
        try:
            data = json.loads(text[start : end + 1]) if 0 <= start < end else None
        except ValueError:
            data = None
        if data is None:
            raise ToolError("unparseable rocm-smi JSON: {}".format(exc)) from exc
    if not isinstance(data, dict):
        raise ToolError("rocm-smi JSON is not an object")
    cards: Dict[int, Dict[str, str]] = {}
    driver = None
    for key, value in data.items():
        if not isinstance(value, dict):
            continue
        fields = {str(k).strip().lower(): str(v).strip() for k, v in value.items() if str(k).strip()}
        match = re.fullmatch(r"card(\d+)", str(key).strip().lower())
        if match:
            cards[int(match.group(1))] = fields
        elif str(key).lower() == "system":
            driver = text_or_none(fields.get("driver version"))
    return {"cards": cards, "driver_version": driver}


def parse_hy_smi(text: str) -> Dict[str, Any]:
    """Summary table rows and DCU[N] detail lines, by card index."""
    cards: Dict[int, Dict[str, str]] = {}
    header: Optional[List[str]] = None
    for line in text.splitlines():
        detail = _DETAIL_RE.match(line)
        if detail:
            index, key, value = detail.groups()
            cards.setdefault(int(index), {})[key.strip().lower()] = value.strip()
            continue
        tokens = line.split()
        if tokens and tokens[0] in ("DCU", "HCU", "GPU") and "Temp" in tokens:
            header = [t.lower() for t in tokens]
            continue
        if header is None:
            continue
        if not tokens or not tokens[0].isdigit():
            if line.strip().startswith("="):
                continue
            header = None
            continue
        row = cards.setdefault(int(tokens[0]), {})
        for name, value in zip(header[1:], tokens[1:]):  # noqa: B905 - rows may be short; strict= is 3.10+
            row.setdefault("table " + name, value)
    driver = _DRIVER_RE.search(text)
    return {"cards": cards, "driver_version": driver.group(1) if driver else None}


def _get(fields: Dict[str, str], *keys: str) -> Optional[str]:
    for key in keys:
        value = text_or_none(fields.get(key))
        if value is not None:
            return value
    return None


def _is_other_vendor(fields: Dict[str, str]) -> bool:
    vendor = (fields.get("card vendor") or "").lower()
    return bool(vendor) and not any(word in vendor for word in ("haiguang", "hygon"))


def _card(index: int, fields: Dict[str, str], driver: Optional[str]) -> Dict[str, Any]:
    serial, serial_raw = clean_serial(fields.get("serial number"))
    uuid, uuid_raw = clean_uuid(fields.get("unique id"))
    model_raw = _get(fields, "card series", "card model", "marketing name")
    device_id = (_get(fields, "device id", "card model") or "").lower()
    device_id = device_id[2:] if device_id.startswith("0x") else device_id
    memory = parse_mib(_get(fields, "vram total memory (mib)"))
    if memory is None and _get(fields, "vram total memory (b)"):
        memory = parse_mib(_get(fields, "vram total memory (b)") + " B")
    health: Dict[str, Any] = {"status": "ok", "reasons": [], "xid_events": []}
    mode = _get(fields, "table mode")
    health["mode"] = mode
    if mode and mode.lower() != "normal":
        health["status"] = "degraded"
        health["reasons"].append("hy-smi mode {}".format(mode))
    for key, value in fields.items():
        count = parse_int(value) if re.search(r"uncorrect", key) else None
        if count:
            health["status"] = "failed"
            health["reasons"].append("{}: {}".format(key, count))
    return {
        "vendor": "hygon",
        "model": None if is_masked_text(model_raw) else model_raw,
        "model_raw": model_raw,
        "serial": serial,
        "serial_raw": serial_raw,
        "uuid": uuid,
        "uuid_raw": uuid_raw,
        "index": index,
        "pci_bus_id": normalize_pci_bus_id(_get(fields, "pci bus")),
        "pci_device_id": "{}:{}".format(HYGON_PCI_VENDOR, device_id)
        if re.fullmatch(r"[0-9a-f]{4}", device_id)
        else None,
        "memory_mib": memory,
        "driver_version": driver,
        "firmware_version": _get(fields, "vbios version"),
        "temperature_c": parse_float(
            _get(fields, "temperature (sensor edge) (c)", "temperature (sensor junction) (c)", "table temp")
        ),
        "power_w": parse_float(
            _get(
                fields,
                "average graphics package power (w)",
                "current socket graphics package power (w)",
                "table avgpwr",
            )
        ),
        "health": health,
    }


def collect(source: Source) -> Fragment:
    json_text = source.output(JSON_NAME)
    hy_text = source.output(TEXT_NAME)
    if json_text is None and hy_text is None:
        return {}
    parsed = [parse_rocm_json(json_text)] if json_text is not None else []
    if hy_text is not None:
        parsed.append(parse_hy_smi(hy_text))
    merged: Dict[int, Dict[str, str]] = {}
    for part in reversed(parsed):  # hy-smi first, then the JSON overwrites
        for index, fields in part["cards"].items():
            card = merged.setdefault(index, {})
            # A real value wins over a placeholder whichever tool printed it; a placeholder is kept as raw text.
            card.update({k: v for k, v in fields.items() if text_or_none(v) or k not in card})
    driver = next((p["driver_version"] for p in parsed if p["driver_version"]), None)
    cards = [_card(i, f, driver) for i, f in sorted(merged.items()) if not _is_other_vendor(f)]
    if json_text is not None and hy_text is None and not cards and not parsed[0]["cards"]:
        raise ToolError("rocm-smi JSON lists no cards")
    software = [{"component": "hygon-driver", "version": driver}] if driver and cards else []
    dtk_lines = (source.output("dtk-version.txt") or "").strip().splitlines()
    dtk = text_or_none(dtk_lines[0]) if dtk_lines else None
    if dtk and cards:
        software.append({"component": "dtk", "version": dtk})
    return {"accelerators": cards, "software": software}
