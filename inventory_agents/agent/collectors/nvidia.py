"""NVIDIA GPUs from `nvidia-smi -q -x` (preferred) or `nvidia-smi --query-gpu=... --format=csv`.

The XML has changed shape across driver branches (DTD v10..v13, and R418-era files with no DOCTYPE at all):
ECC counters moved from volatile/single_bit/total to volatile/sram_correctable + dram_correctable, power
moved from power_readings/power_draw to gpu_power_readings/instant_power_draw. Every field is looked up by
all the paths known to carry it, and any field may be missing.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..runner import Source, ToolError
from ..util import (
    clean_serial,
    clean_uuid,
    normalize_pci_bus_id,
    parse_float,
    parse_int,
    parse_mib,
    parse_yes_no,
    text_or_none,
)
from . import Fragment

XML_NAME = "nvidia-smi-q-x.xml"
CSV_NAME = "nvidia-smi-query-gpu.csv"

# Xid codes (NVIDIA's Xid catalog) and the health hint the agent gives; the server re-grades with its policy.
# The failed set is the one the server's default policy fails a card for (DEFAULT_POLICIES in
# cmdb/services/health_policies.py); 63 and 94 need at least a reset and a check before the card runs jobs again.
XID_FAILED = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    63: "page retirement / row remap event",
    64: "page retirement / row remap failure",
    74: "NVLink error",
    79: "fallen off the bus",
    92: "high single-bit ECC rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    140: "unrecovered ECC error",
}
XID_DEGRADED = {
    61: "internal micro-controller breakpoint",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "recovery action required",
}


def new_health() -> Dict[str, Any]:
    return {"status": "unknown", "reasons": [], "xid_events": []}


# --------------------------------------------------------------------------------------------- XML


def _parse_xml_tolerant(text: str) -> Tuple[Dict[str, str], List[ET.Element], Optional[str]]:
    """(top-level fields, complete <gpu> elements, truncation error or None).

    A pull parser keeps every <gpu> that closed before the document broke off, so a truncated capture still
    yields the cards it fully describes (a card cut in the middle is dropped, never half-reported).
    """
    # A driver warning printed before the document (infoROM, persistence daemon) must not hide the cards.
    starts = [i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0]
    if starts and min(starts) > 0:
        text = text[min(starts) :]
    parser = ET.XMLPullParser(events=("start", "end"))
    top: Dict[str, str] = {}
    gpus: List[ET.Element] = []
    depth = 0
    error: Optional[str] = None
    try:
        parser.feed(text)
        parser.close()
    except ET.ParseError as exc:
        error = str(exc)
    try:
        # The pull parser queues a syntax error among the events: everything before it is still usable.
        for event, elem in parser.read_events():
            if event == "start":
                depth += 1
                continue
            depth -= 1
            if depth == 1 and elem.tag == "gpu":
                gpus.append(elem)
            elif depth == 1 and elem.tag in ("driver_version", "cuda_version", "attached_gpus"):
                top[elem.tag] = (elem.text or "").strip()
    except ET.ParseError as exc:
        error = error or str(exc)
    return top, gpus, error


def _find(elem: ET.Element, *paths: str) -> Optional[str]:
    """Text of the first path that exists and is not N/A."""
    for path in paths:
        node = elem.find(path)
        if node is not None and text_or_none(node.text) is not None:
            return (node.text or "").strip()
    return None


def _sum_known(values: Iterable[Optional[int]]) -> Optional[int]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc_pair(node: Optional[ET.Element]) -> Tuple[Optional[int], Optional[int]]:
    """(correctable, uncorrectable) counts of an ecc_errors/volatile or /aggregate node."""
    if node is None:
        return None, None
    if node.find("single_bit") is not None or node.find("double_bit") is not None:
        # Pre-R470 layout: per-unit counters plus a total.
        sbe = parse_int(_find(node, "single_bit/total"))
        dbe = parse_int(_find(node, "double_bit/total"))
        if sbe is None:
            sbe = _sum_known(parse_int(c.text) for c in node.findall("single_bit/*"))
        if dbe is None:
            dbe = _sum_known(parse_int(c.text) for c in node.findall("double_bit/*"))
        return sbe, dbe
    corr = _sum_known(parse_int(_find(node, tag)) for tag in ("sram_correctable", "dram_correctable"))
    unc = _sum_known(
        parse_int(_find(node, tag))
        for tag in (
            "sram_uncorrectable",
            "sram_uncorrectable_parity",
            "sram_uncorrectable_secded",
            "dram_uncorrectable",
        )
    )
    return corr, unc


def _pci_device_id(raw: Optional[str]) -> Optional[str]:
    """'20B210DE' / '0x20B210DE' (device id then vendor id) -> '10de:20b2'."""
    text = (raw or "").strip().lower()
    if text.startswith("0x"):
        text = text[2:]
    if len(text) != 8 or any(ch not in "0123456789abcdef" for ch in text):
        return None
    return "{}:{}".format(text[4:], text[:4])


def _mig_mode(raw: Optional[str]) -> Optional[str]:
    flag = parse_yes_no(raw)
    return None if flag is None else ("enabled" if flag else "disabled")


def _gpu_from_xml(gpu: ET.Element, index: int, top: Dict[str, str]) -> Dict[str, Any]:
    serial, serial_raw = clean_serial(_find(gpu, "serial") or _raw(gpu, "serial"))
    uuid, uuid_raw = clean_uuid(_find(gpu, "uuid") or _raw(gpu, "uuid"))
    health = new_health()
    health["ecc_mode"] = (text_or_none(_find(gpu, "ecc_mode/current_ecc")) or "").lower() or None
    vol = _ecc_pair(gpu.find("ecc_errors/volatile"))
    agg = _ecc_pair(gpu.find("ecc_errors/aggregate"))
    health.update(
        ecc_volatile_sbe=vol[0],
        ecc_volatile_dbe=vol[1],
        ecc_aggregate_sbe=agg[0],
        ecc_aggregate_dbe=agg[1],
        retired_pages_sbe=parse_int(_find(gpu, "retired_pages/multiple_single_bit_retirement/retired_count")),
        retired_pages_dbe=parse_int(_find(gpu, "retired_pages/double_bit_retirement/retired_count")),
        retired_pages_pending=parse_yes_no(
            _find(gpu, "retired_pages/pending_retirement", "retired_pages/pending_blacklist")
        ),
        remapped_rows_correctable=parse_int(_find(gpu, "remapped_rows/remapped_row_corr")),
        remapped_rows_uncorrectable=parse_int(_find(gpu, "remapped_rows/remapped_row_unc")),
        remapped_rows_pending=parse_yes_no(_find(gpu, "remapped_rows/remapped_row_pending")),
        remapped_rows_failure=parse_yes_no(_find(gpu, "remapped_rows/remapped_row_failure")),
        reset_required=parse_yes_no(_find(gpu, "gpu_reset_status/reset_required")),
    )
    card: Dict[str, Any] = {
        "vendor": "nvidia",
        "model": text_or_none(_find(gpu, "product_name")),
        "serial": serial,
        "serial_raw": serial_raw,
        "uuid": uuid,
        "uuid_raw": uuid_raw,
        "index": index,
        "pci_bus_id": normalize_pci_bus_id(_find(gpu, "pci/pci_bus_id") or gpu.get("id")),
        "pci_device_id": _pci_device_id(_find(gpu, "pci/pci_device_id")),
        "memory_mib": parse_mib(_find(gpu, "fb_memory_usage/total")),
        "driver_version": text_or_none(top.get("driver_version")),
        "firmware_version": text_or_none(_find(gpu, "vbios_version")),
        "inforom_version": text_or_none(_find(gpu, "inforom_version/img_version")),
        "cuda_version": text_or_none(top.get("cuda_version")),
        "mig_mode": _mig_mode(_find(gpu, "mig_mode/current_mig")),
        "temperature_c": parse_float(_find(gpu, "temperature/gpu_temp")),
        "power_w": parse_float(
            _find(
                gpu,
                "gpu_power_readings/power_draw",
                "gpu_power_readings/instant_power_draw",
                "gpu_power_readings/average_power_draw",
                "power_readings/power_draw",
            )
        ),
        "health": health,
    }
    migs = gpu.findall("mig_devices/mig_device")
    if migs:
        card["mig_devices"] = len(migs)
    if parse_yes_no(_find(gpu, "multigpu_board")):
        card["_board_id"] = _find(gpu, "board_id")
    return card


def _raw(elem: ET.Element, path: str) -> Optional[str]:
    node = elem.find(path)
    return None if node is None else (node.text or "").strip()


def _merge_multi_gpu_boards(cards: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Dual-GPU boards (K80, M60) list one <gpu> per GPU: the report's accelerator is the board."""
    merged: List[Dict[str, Any]] = []
    boards: Dict[str, Dict[str, Any]] = {}
    for card in cards:
        board_id = card.pop("_board_id", None)
        if not board_id:
            merged.append(card)
            continue
        chip = {k: card.get(k) for k in ("index", "uuid", "uuid_raw", "pci_bus_id", "memory_mib", "temperature_c")}
        if board_id not in boards:
            board = dict(card)
            board["chips"] = [chip]
            boards[board_id] = board
            merged.append(board)
            continue
        board = boards[board_id]
        board["chips"].append(chip)
        if card.get("memory_mib") and board.get("memory_mib"):
            board["memory_mib"] += card["memory_mib"]
        _fold_health(board["health"], card["health"])
    return merged


def _fold_health(into: Dict[str, Any], other: Dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, bool):
            into[key] = bool(into.get(key)) or value
        elif isinstance(value, int) and key not in ("status",):
            into[key] = (into.get(key) or 0) + value


def parse_xml(text: str) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """(cards, error). error is set when the document is truncated or unparseable."""
    top, gpus, error = _parse_xml_tolerant(text)
    if error is not None and not gpus:
        first = text.strip().splitlines()[0][:200] if text.strip() else "empty output"
        raise ToolError("unparseable nvidia-smi XML ({}): {}".format(error, first))
    cards = [_gpu_from_xml(gpu, index, top) for index, gpu in enumerate(gpus)]
    if error is not None:
        error = "truncated nvidia-smi XML ({}); kept {} complete <gpu> element(s)".format(error, len(cards))
    return _merge_multi_gpu_boards(cards), error


# --------------------------------------------------------------------------------------------- CSV


def _csv_rows(text: str) -> List[Dict[str, str]]:
    """Rows keyed by field name ('memory.total [MiB]' -> 'memory.total'), whatever the column order."""
    reader = csv.reader(io.StringIO(text.strip("\ufeff")), skipinitialspace=True)
    rows = [row for row in reader if any(cell.strip() for cell in row)]
    if not rows:
        raise ToolError("empty nvidia-smi CSV")
    header = [cell.split(" [")[0].strip() for cell in rows[0]]
    if "uuid" not in header and "name" not in header and "pci.bus_id" not in header:
        raise ToolError("nvidia-smi CSV without a header naming name/uuid/pci.bus_id: {}".format(rows[0][:5]))
    # Short rows (a truncated capture) keep the fields they have; zip(strict=) is Python 3.10+ anyway.
    return [dict(zip(header, (cell.strip() for cell in row))) for row in rows[1:]]  # noqa: B905


def _gpu_from_csv(row: Dict[str, str], position: int) -> Dict[str, Any]:
    def get(*keys: str) -> Optional[str]:
        for key in keys:
            value = text_or_none(row.get(key))
            if value is not None:
                return value
        return None

    serial, serial_raw = clean_serial(row.get("serial"))
    uuid, uuid_raw = clean_uuid(row.get("uuid"))
    health = new_health()
    health.update(
        ecc_mode=(get("ecc.mode.current") or "").lower() or None,
        ecc_volatile_sbe=parse_int(get("ecc.errors.corrected.volatile.total")),
        ecc_volatile_dbe=parse_int(get("ecc.errors.uncorrected.volatile.total")),
        ecc_aggregate_sbe=parse_int(get("ecc.errors.corrected.aggregate.total")),
        ecc_aggregate_dbe=parse_int(get("ecc.errors.uncorrected.aggregate.total")),
        retired_pages_sbe=parse_int(get("retired_pages.single_bit_ecc.count", "retired_pages.sbe")),
        retired_pages_dbe=parse_int(get("retired_pages.double_bit.count", "retired_pages.dbe")),
        retired_pages_pending=parse_yes_no(get("retired_pages.pending")),
        remapped_rows_correctable=parse_int(get("remapped_rows.correctable")),
        remapped_rows_uncorrectable=parse_int(get("remapped_rows.uncorrectable")),
        remapped_rows_pending=parse_yes_no(get("remapped_rows.pending")),
        remapped_rows_failure=parse_yes_no(get("remapped_rows.failure")),
    )
    index = parse_int(get("index"))
    return {
        "vendor": "nvidia",
        "model": get("name", "gpu_name"),
        "serial": serial,
        "serial_raw": serial_raw,
        "uuid": uuid,
        "uuid_raw": uuid_raw,
        "index": index if index is not None else position,
        "pci_bus_id": normalize_pci_bus_id(get("pci.bus_id", "gpu_bus_id")),
        "pci_device_id": _pci_device_id(get("pci.device_id")),
        "memory_mib": parse_mib(get("memory.total")),
        "driver_version": get("driver_version"),
        "firmware_version": get("vbios_version"),
        "cuda_version": None,  # --query-gpu has no CUDA version field
        "mig_mode": _mig_mode(get("mig.mode.current")),
        "temperature_c": parse_float(get("temperature.gpu")),
        "power_w": parse_float(get("power.draw", "power.draw.instant", "power.draw.average")),
        "health": health,
    }


def parse_csv(text: str) -> List[Dict[str, Any]]:
    return [_gpu_from_csv(row, position) for position, row in enumerate(_csv_rows(text))]


# --------------------------------------------------------------------------------------------- grading


def grade(card: Dict[str, Any]) -> None:
    """Set health.status and health.reasons from the counters and Xid events (a hint; the server re-grades)."""
    health = card["health"]
    failed: List[str] = []
    degraded: List[str] = []
    if (health.get("ecc_volatile_dbe") or 0) > 0:
        failed.append("uncorrectable ECC errors since boot: {}".format(health["ecc_volatile_dbe"]))
    if health.get("remapped_rows_failure"):
        failed.append("row remapping failure")
    if health.get("remapped_rows_pending"):
        degraded.append("row remap pending (GPU reset needed)")
    if health.get("retired_pages_pending"):
        degraded.append("page retirement pending (GPU reset needed)")
    if (health.get("ecc_aggregate_dbe") or 0) > 0 and not failed:
        degraded.append("uncorrectable ECC errors (lifetime): {}".format(health["ecc_aggregate_dbe"]))
    if health.get("reset_required"):
        degraded.append("GPU reset required")
    for event in health.get("xid_events") or []:
        xid = event.get("xid")
        if xid in XID_FAILED:
            failed.append("Xid {}: {}".format(xid, XID_FAILED[xid]))
        elif xid in XID_DEGRADED:
            degraded.append("Xid {}: {}".format(xid, XID_DEGRADED[xid]))
    health["reasons"] = _dedupe(failed + degraded)
    health["status"] = "failed" if failed else "degraded" if degraded else "ok"


def _dedupe(items: List[str]) -> List[str]:
    seen: Dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


# --------------------------------------------------------------------------------------------- collector


def collect(source: Source) -> Fragment:
    xml_text = source.output(XML_NAME)
    errors: List[Dict[str, str]] = []
    cards: List[Dict[str, Any]] = []
    xml_complete = False
    if xml_text is not None:
        try:
            cards, truncation = parse_xml(xml_text)
            xml_complete = truncation is None
            if truncation:
                errors.append({"collector": "nvidia", "error": truncation})
        except ToolError as exc:
            errors.append({"collector": "nvidia", "error": str(exc)})
    csv_text = None
    if not xml_complete:
        # The CSV fills in what the XML could not give: all cards when the XML is missing or broken, the cards
        # cut off when it is truncated (matched by PCI bus id).
        csv_text = source.output(CSV_NAME)
        if csv_text is not None:
            try:
                csv_cards = parse_csv(csv_text)
            except ToolError as exc:
                if not cards:
                    raise ToolError("; ".join([e["error"] for e in errors] + [str(exc)])) from exc
                errors.append({"collector": "nvidia", "error": str(exc)})
                csv_cards = []
            known = {card["pci_bus_id"] for card in cards}
            cards.extend(card for card in csv_cards if card["pci_bus_id"] is None or card["pci_bus_id"] not in known)
    if xml_text is None and csv_text is None:
        return {}
    if not cards and errors:
        raise ToolError("; ".join(e["error"] for e in errors))
    for card in cards:
        grade(card)
    drivers = sorted({card["driver_version"] for card in cards if card.get("driver_version")})
    cudas = sorted({card["cuda_version"] for card in cards if card.get("cuda_version")})
    software = [{"component": "nvidia-driver", "version": v} for v in drivers]
    software += [{"component": "cuda", "version": v} for v in cudas]
    return {"accelerators": cards, "software": software, "collector_errors": errors}
