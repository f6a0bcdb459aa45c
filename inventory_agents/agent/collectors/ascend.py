"""Huawei Ascend NPUs from npu-smi.

`npu-smi info` (the table) and `npu-smi info -m` (NPU ID / Chip ID / Chip Logic ID / Chip Name) give the cards
and their chips; `npu-smi info -t board|health|ecc|usages|common -i N` give key : value blocks per card. The
accelerator is the physical card (NPU ID): an Atlas 300I Duo has one NPU ID with two 310P chips, listed in
`chips`. The MCU that 910B boards list as a second "chip" is a board controller, not a compute chip.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ..runner import NPU_SMI_TYPES, Source
from ..util import (
    clean_serial,
    is_masked_text,
    normalize_pci_bus_id,
    parse_colon_blocks,
    parse_float,
    parse_int,
    text_or_none,
)
from . import Fragment

TABLE_NAME = "npu-smi-info.txt"
MAP_NAME = "npu-smi-info-m.txt"
_HEALTH_WORDS = {"ok", "warning", "alarm", "critical", "unknown", "major", "minor", "general warning"}
_HEALTH_RANK = {
    "ok": 0,
    "unknown": 1,
    "minor": 2,
    "warning": 2,
    "general warning": 2,
    "major": 3,
    "alarm": 3,
    "critical": 4,
}
_STATUS_OF = {
    "ok": "ok",
    "unknown": "unknown",
    "minor": "degraded",
    "warning": "degraded",
    "general warning": "degraded",
    "major": "failed",
    "alarm": "failed",
    "critical": "failed",
}
# PCI device ids of Huawei (19e5) NPUs: names a card when the capture masked its chip name.
_MODEL_BY_DEVICE_ID = {"d100": "Ascend 310", "d500": "Ascend 310P", "d801": "Ascend 910", "d802": "Ascend 910B"}
_PAIR_RE = re.compile(r"(\d+)\s*/\s*(\d+)")
_ECC_KEYS = {
    "HBM Single Bit Error Count": "ecc_hbm_sbe",
    "HBM Double Bit Error Count": "ecc_hbm_dbe",
    "HBM Single Bit Aggregate Total Err Cnt": "ecc_hbm_aggregate_sbe",
    "HBM Double Bit Aggregate Total Err Cnt": "ecc_hbm_aggregate_dbe",
    "HBM Single Bit Isolated Pages Count": "isolated_pages_hbm_sbe",
    "HBM Double Bit Isolated Pages Count": "isolated_pages_hbm_dbe",
    "DDR Single Bit Error Count": "ecc_ddr_sbe",
    "DDR Double Bit Error Count": "ecc_ddr_dbe",
    "DDR Single Bit Aggregate Total Err Cnt": "ecc_ddr_aggregate_sbe",
    "DDR Double Bit Aggregate Total Err Cnt": "ecc_ddr_aggregate_dbe",
    "DDR Single Bit Isolated Pages Count": "isolated_pages_ddr_sbe",
    "DDR Double Bit Isolated Pages Count": "isolated_pages_ddr_dbe",
}


# --------------------------------------------------------------------------------------------- table


def _leading_ints(cells: List[str]) -> Tuple[List[int], List[str]]:
    """Leading integer tokens of the joined cells, and the rest ('0  310P3' -> [0], ['310P3'])."""
    tokens = " ".join(cells).split()
    ints: List[int] = []
    while tokens and tokens[0].isdigit():
        ints.append(int(tokens.pop(0)))
    return ints, tokens


def parse_table(text: str) -> Dict[str, Any]:
    """{'version': str|None, 'npus': {npu_id: {'name', 'health', 'power_w', 'temperature_c', 'chips': [...]}}}."""
    version = None
    npus: Dict[int, Dict[str, Any]] = {}
    current: Optional[Dict[str, Any]] = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith("|"):
            continue
        if "Version:" in stripped and version is None:
            match = re.search(r"Version:\s*(\S+)", stripped)
            version = match.group(1) if match else None
            continue
        cells = [cell.strip() for cell in stripped.strip("|").split("|")]
        if any("Process" in cell for cell in cells):
            break  # the per-process table below has its own NPU/Chip columns
        health_at = next((i for i, c in enumerate(cells) if c.lower() in _HEALTH_WORDS), None)
        bus_at = next((i for i, c in enumerate(cells) if normalize_pci_bus_id(c)), None)
        if health_at is not None:
            tokens = " ".join(cells[:health_at]).split()
            if not tokens or not tokens[0].isdigit():
                continue
            npu = npus.setdefault(int(tokens[0]), {"name": None, "health": None, "chips": []})
            npu["name"] = npu["name"] or (" ".join(tokens[1:]) or None)
            npu["health"] = _worst([npu["health"], cells[health_at]])
            numbers = _numbers(" ".join(cells[health_at + 1 :]))
            npu.setdefault("power_w", numbers[0] if numbers else None)
            npu.setdefault("temperature_c", numbers[1] if len(numbers) > 1 else None)
            npu["_row"] = {
                "health": cells[health_at],
                "power_w": numbers[0] if numbers else None,
                "temperature_c": numbers[1] if len(numbers) > 1 else None,
            }
            current = npu
        elif bus_at is not None and current is not None:
            ints, _ = _leading_ints(cells[:bus_at])
            usage = " ".join(cells[bus_at + 1 :])
            pairs = [int(total) for _, total in _PAIR_RE.findall(usage)]
            aicore = _numbers(_PAIR_RE.sub(" ", usage))
            row = current.pop("_row", {})
            current["chips"].append(
                {
                    "chip_id": ints[0] if ints else len(current["chips"]),
                    "logic_id": ints[1] if len(ints) > 1 else None,
                    "pci_bus_id": normalize_pci_bus_id(cells[bus_at]),
                    # 910-class rows: Memory-Usage (DDR) then HBM-Usage; 310P rows: Memory-Usage only.
                    "ddr_mib": pairs[0] if pairs else None,
                    "hbm_mib": pairs[1] if len(pairs) > 1 else None,
                    "aicore_percent": aicore[0] if aicore else None,
                    "health": row.get("health"),
                    "temperature_c": row.get("temperature_c"),
                    "power_w": row.get("power_w"),
                }
            )
    for npu in npus.values():
        npu.pop("_row", None)
    return {"version": version, "npus": npus}


def _numbers(text: str) -> List[Optional[float]]:
    values: List[Optional[float]] = []
    for token in text.split():
        if token.upper() in {"NA", "N/A", "-"}:
            values.append(None)
        elif re.fullmatch(r"[-+]?\d+(?:\.\d+)?", token):
            values.append(float(token))
    return values


def _worst(values: List[Optional[str]]) -> Optional[str]:
    known = [v for v in values if v]
    if not known:
        return None
    return max(known, key=lambda v: _HEALTH_RANK.get(v.lower(), 1))


# --------------------------------------------------------------------------------------------- -m mapping


def parse_mapping(text: str) -> List[Dict[str, Any]]:
    """Rows of `npu-smi info -m`; the header may sit anywhere (npu_info_collect.sh captures have a preamble)."""
    rows: List[Dict[str, Any]] = []
    in_table = False
    for line in text.splitlines():
        if "NPU ID" in line and "Chip ID" in line:
            in_table = True
            continue
        if not in_table:
            continue
        parts = line.split(None, 3)
        if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
            if rows:
                break
            continue
        logic = parts[2] if len(parts) > 2 else None
        name = parts[3].strip() if len(parts) > 3 else None
        rows.append(
            {
                "npu_id": int(parts[0]),
                "chip_id": int(parts[1]),
                "logic_id": int(logic) if logic is not None and logic.isdigit() else None,
                "name": name,
                "is_mcu": (name or "").lower() == "mcu" or logic == "-",
            }
        )
    return rows


# --------------------------------------------------------------------------------------------- -t blocks


def parse_detail(text: str) -> Tuple[Dict[str, str], Dict[int, Dict[str, str]]]:
    """(card-level fields, {chip_id: chip fields}) of `npu-smi info -t <type> -i N` output."""
    card: Dict[str, str] = {}
    chips: Dict[int, Dict[str, str]] = {}
    for block in parse_colon_blocks(text):
        if "Chip ID" not in block and (block.get("Chip Name") or "").lower() == "mcu":
            continue
        chip_id = parse_int(block.get("Chip ID"))
        if chip_id is None:
            card.update(block)
        else:
            chips.setdefault(chip_id, {}).update(block)
    return card, chips


def _chip_health(fields: Dict[str, str]) -> Tuple[Optional[str], List[str], Optional[str]]:
    health = text_or_none(fields.get("Health Status") or fields.get("Health"))
    codes = [c for c in re.split(r"[\s,]+", fields.get("Error Code") or "") if c and text_or_none(c)]
    info = text_or_none(fields.get("Error Information"))
    return health, codes, info


def _first_known(*values: Optional[float]) -> Optional[float]:
    return next((v for v in values if v is not None), None)


def _model(name: Optional[str]) -> Optional[str]:
    if not name:
        return None
    name = name.strip()
    return name if name.lower().startswith("ascend") else "Ascend " + name


def _card(
    npu_id: int,
    table: Dict[str, Any],
    mapping: List[Dict[str, Any]],
    details: Dict[str, Any],
    table_version: Optional[str],
) -> Dict[str, Any]:
    board, board_chips = details.get("board", ({}, {}))
    chips: Dict[int, Dict[str, Any]] = {}
    for chip in table.get("chips", []):
        chips[chip["chip_id"]] = dict(chip)
    for row in mapping:
        if row["npu_id"] == npu_id and not row["is_mcu"]:
            chip = chips.setdefault(row["chip_id"], {"chip_id": row["chip_id"]})
            chip["logic_id"] = row["logic_id"] if row["logic_id"] is not None else chip.get("logic_id")
            chip["name"] = row["name"]
    for kind in NPU_SMI_TYPES:
        for chip_id, fields in details.get(kind, ({}, {}))[1].items():
            chip = chips.setdefault(chip_id, {"chip_id": chip_id})
            chip.setdefault("_fields", {}).update(fields)

    health = {"status": "unknown", "reasons": [], "xid_events": [], "health_raw": None, "error_codes": []}
    raw_healths = [table.get("health")]
    card_health = _chip_health(details.get("health", ({}, {}))[0])
    raw_healths.append(card_health[0])
    health["error_codes"] += card_health[1]
    infos = [card_health[2]]
    chip_list = []
    for chip_id in sorted(chips):
        chip = chips[chip_id]
        fields = chip.pop("_fields", {})
        chip_health, codes, info = _chip_health(fields)
        raw_healths += [chip.get("health"), chip_health]
        health["error_codes"] += codes
        infos.append(info)
        for key, name in _ECC_KEYS.items():
            value = parse_int(fields.get(key))
            if value is not None:
                health[name] = (health.get(name) or 0) + value
        hbm = parse_int(fields.get("HBM Capacity(MB)")) or chip.get("hbm_mib")
        ddr = parse_int(fields.get("DDR Capacity(MB)")) or chip.get("ddr_mib")
        chip_list.append(
            {
                "chip_id": chip_id,
                "logic_id": chip.get("logic_id"),
                "name": chip.get("name") or text_or_none(fields.get("Chip Name")),
                "pci_bus_id": chip.get("pci_bus_id") or normalize_pci_bus_id(fields.get("PCIe Bus Info")),
                "memory_mib": hbm if hbm else ddr,
                "health": _worst([chip.get("health"), chip_health]),
                "die_id": text_or_none(fields.get("VDie ID")),
                "temperature_c": _first_known(parse_float(fields.get("Temperature(C)")), chip.get("temperature_c")),
                "power_w": _first_known(parse_float(fields.get("NPU Real-time Power(W)")), chip.get("power_w")),
                "aicore_count": parse_int(fields.get("Aicore Count")),
            }
        )
    health["health_raw"] = _worst(raw_healths)
    health["error_info"] = "; ".join(i for i in infos if i) or None
    health["error_codes"] = sorted(set(health["error_codes"]))

    chip_names = [c["name"] for c in chip_list if c.get("name")]
    model_raw = _model(chip_names[0] if chip_names else table.get("name"))
    model = model_raw
    device_id = (board.get("PCI Device ID") or "").strip().lower().replace("0x", "")
    if not re.fullmatch(r"[0-9a-f]{4}", device_id):
        device_id = ""  # a cut or garbled line ("0xD80") names no device
    if is_masked_text(model_raw):
        model = _MODEL_BY_DEVICE_ID.get(device_id)
    serial, serial_raw = clean_serial(board.get("Serial Number"))
    memories = [c["memory_mib"] for c in chip_list if c.get("memory_mib")]
    first_chip = chip_list[0] if chip_list else {}
    card: Dict[str, Any] = {
        "vendor": "ascend",
        "model": model,
        "model_raw": model_raw,
        "serial": serial,
        "serial_raw": serial_raw,
        "uuid": None,
        "index": npu_id,
        "pci_bus_id": normalize_pci_bus_id(board.get("PCIe Bus Info")) or first_chip.get("pci_bus_id"),
        "pci_device_id": "19e5:" + device_id if device_id else None,
        "memory_mib": sum(memories) if memories else None,
        "driver_version": text_or_none(board.get("Software Version")) or table_version,
        "firmware_version": text_or_none(board.get("Firmware Version"))
        or next(
            (text_or_none(f.get("Firmware Version")) for f in board_chips.values() if f.get("Firmware Version")), None
        ),
        "temperature_c": table.get("temperature_c")
        if table.get("temperature_c") is not None
        else first_chip.get("temperature_c"),
        "power_w": table.get("power_w") if table.get("power_w") is not None else first_chip.get("power_w"),
        "chips": chip_list,
        "health": health,
    }
    grade(card)
    return card


def grade(card: Dict[str, Any]) -> None:
    health = card["health"]
    raw = (health.get("health_raw") or "").lower()
    status = _STATUS_OF.get(raw, "unknown")
    reasons = []
    if status != "ok" and raw:
        reasons.append("npu-smi health {}".format(health["health_raw"]))
    if health.get("error_codes"):
        reasons.append("error codes: {}".format(" ".join(health["error_codes"])))
    dbe = sum(health.get(k) or 0 for k in ("ecc_hbm_dbe", "ecc_ddr_dbe", "isolated_pages_hbm_dbe"))
    if dbe and status in ("ok", "unknown"):
        status = "degraded"
        reasons.append("double-bit ECC errors / isolated pages: {}".format(dbe))
    health["status"] = status
    health["reasons"] = reasons


# --------------------------------------------------------------------------------------------- collector


def _npu_ids_from_names(names: List[str]) -> List[int]:
    ids = set()
    for name in names:
        match = re.fullmatch(r"npu-smi-([a-z]+)-(\d+)\.txt", name)
        if match and match.group(1) in NPU_SMI_TYPES:
            ids.add(int(match.group(2)))
    return sorted(ids)


def _version_from_info(text: Optional[str]) -> Optional[str]:
    if not text:
        return None
    match = re.search(r"(?im)^\s*(?:version|Version|package_version)\s*=\s*(\S+)", text)
    return match.group(1).strip("\"'") if match else None


def collect(source: Source) -> Fragment:
    table_text = source.output(TABLE_NAME)
    map_text = source.output(MAP_NAME)
    file_ids = _npu_ids_from_names(source.names())
    if table_text is None and map_text is None and not file_ids:
        return {}
    table = parse_table(table_text) if table_text else {"version": None, "npus": {}}
    mapping = parse_mapping(map_text) if map_text else []
    npu_ids = sorted(set(table["npus"]) | {row["npu_id"] for row in mapping} | set(file_ids))
    cards = []
    for npu_id in npu_ids:
        details = {}
        for kind in NPU_SMI_TYPES:
            text = source.output("npu-smi-{}-{}.txt".format(kind, npu_id))
            if text:
                details[kind] = parse_detail(text)
        cards.append(_card(npu_id, table["npus"].get(npu_id, {}), mapping, details, table["version"]))
    software = []
    driver = _version_from_info(source.output("ascend-driver-version.info"))
    drivers = sorted({c["driver_version"] for c in cards if c["driver_version"]} | ({driver} if driver else set()))
    firmwares = sorted({c["firmware_version"] for c in cards if c["firmware_version"]})
    cann = _version_from_info(source.output("cann-version.info"))
    software += [{"component": "ascend-driver", "version": v} for v in drivers]
    software += [{"component": "ascend-firmware", "version": v} for v in firmwares]
    if cann:
        software.append({"component": "cann", "version": cann})
    return {"accelerators": cards, "software": software}
