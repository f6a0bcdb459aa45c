"""NVIDIA Xid events from the kernel log (`journalctl -k` or `dmesg`), since the last report.

    NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.

A small state file remembers the newest event time and the hashes of recent Xid lines, so a line is reported
once. The state advances only after a report was delivered or spooled (see __main__), so `collect` runs do not
swallow events. In --from-dir mode there is no state: every line counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional

from ..runner import Source, ToolError
from ..util import normalize_pci_bus_id
from . import Fragment

LOG_NAME = "kernel-log.txt"
STATE_FILE = "xid-state.json"
MAX_REMEMBERED = 1000

_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\):\s*(\d+)\s*,?\s*(.*)$")
_ISO_RE = re.compile(r"^\s*(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)")
_BRACKET_RE = re.compile(r"^\s*\[([^\]]+)\]")
_SYSLOG_RE = re.compile(r"^\s*([A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})")


def _parse_iso(text: str) -> Optional[datetime]:
    """ISO 8601 with ',' or '.' fractions and '+0000' or '+00:00' offsets (Python 3.8's fromisoformat is strict)."""
    match = re.match(
        r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:[.,](\d+))?(Z|([+-])(\d{2}):?(\d{2}))?$", text
    )
    if not match:
        return None
    year, month, day, hour, minute, second, frac, zone, sign, zh, zm = match.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    try:
        stamp = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), micro)
    except ValueError:
        return None
    if zone is None:
        return None  # local time of an unknown zone: keep only the raw text
    offset = timedelta(0) if zone == "Z" else timedelta(hours=int(zh), minutes=int(zm)) * (1 if sign == "+" else -1)
    return stamp.replace(tzinfo=timezone(offset)).astimezone(timezone.utc)


def _timestamp(line: str) -> Optional[str]:
    for pattern in (_ISO_RE, _BRACKET_RE, _SYSLOG_RE):
        match = pattern.match(line)
        if match:
            return match.group(1).strip()
    return None


def parse_kernel_log(text: str) -> List[Dict[str, Any]]:
    """Every Xid line as an event: xid, pci_bus_id, pid, process, message, timestamp_raw, occurred_at."""
    events: List[Dict[str, Any]] = []
    for line in text.splitlines():
        match = _XID_RE.search(line)
        if not match:
            continue
        bus, code, rest = match.groups()
        pid = re.search(r"\bpid=([^,\s]+)", rest)
        name = re.search(r"\bname=([^,]+)", rest)
        message = re.sub(r"\b(pid|name)=[^,]*,?\s*", "", rest).strip()
        raw_ts = _timestamp(line)
        when = _parse_iso(raw_ts.replace(" ", "T", 1)) if raw_ts and raw_ts[:4].isdigit() else None
        events.append(
            {
                "xid": int(code),
                "pci_bus_id": normalize_pci_bus_id(bus),
                "pid": pid.group(1).strip("'\"") if pid else None,
                "process": name.group(1).strip() if name else None,
                "message": message[:500],
                "timestamp_raw": raw_ts,
                "occurred_at": when.strftime("%Y-%m-%dT%H:%M:%SZ") if when else None,
                "_hash": hashlib.sha256(line.strip().encode("utf-8", "replace")).hexdigest()[:24],
            }
        )
    return events


# --------------------------------------------------------------------------------------------- state


def load_state(state_dir: Optional[str]) -> Dict[str, Any]:
    if not state_dir:
        return {}
    try:
        with open(os.path.join(state_dir, STATE_FILE), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return {}  # first run, or a damaged file: report everything once rather than nothing
    return state if isinstance(state, dict) else {}


def save_state(state_dir: str, state: Dict[str, Any]) -> None:
    """Atomic write: a crash mid-write must not lose the remembered hashes."""
    os.makedirs(state_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".xid-state.", dir=state_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
        os.replace(tmp, os.path.join(state_dir, STATE_FILE))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def select_new(events: List[Dict[str, Any]], state: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Events not reported before: hash not remembered and, when both times are known, not older."""
    seen = set(state.get("recent_hashes") or [])
    last_at = state.get("last_at")
    fresh = []
    for event in events:
        if event["_hash"] in seen:
            continue
        if last_at and event["occurred_at"] and event["occurred_at"] < last_at:
            continue
        fresh.append(event)
    return fresh


def next_state(state: Dict[str, Any], events: List[Dict[str, Any]]) -> Dict[str, Any]:
    hashes = list(state.get("recent_hashes") or []) + [event["_hash"] for event in events]
    times = [t for t in [state.get("last_at")] + [event["occurred_at"] for event in events] if t]
    return {"version": 1, "last_at": max(times) if times else None, "recent_hashes": hashes[-MAX_REMEMBERED:]}


def _live_log(source: Source, state: Dict[str, Any]) -> Optional[str]:
    candidates: List[List[str]] = []
    last_at = state.get("last_at")
    if last_at:
        # Across reboots: all kernel messages since the last reported event (a card that fell off the bus is
        # often followed by a reboot before the next run).
        since = datetime.strptime(last_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) - timedelta(seconds=1)
        local = since.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        candidates.append(["journalctl", "_TRANSPORT=kernel", "-o", "short-iso", "--no-pager", "--since", local])
    candidates += [
        ["journalctl", "-k", "-o", "short-iso", "--no-pager"],
        ["dmesg", "--time-format", "iso"],
        ["dmesg"],
    ]
    last_error: Optional[ToolError] = None
    for argv in candidates:
        try:
            text = source.run(argv)  # type: ignore[attr-defined]
        except ToolError as exc:
            if "timed out" in str(exc):
                raise
            last_error = exc
            continue
        if text is not None:
            return text
    if last_error is not None:
        raise last_error
    return None


def collect(source: Source, state_dir: Optional[str] = None) -> Fragment:
    if source.live:
        state = load_state(state_dir)
        text = _live_log(source, state)
    else:
        state = {}
        text = source.output(LOG_NAME)
    if text is None:
        return {}
    events = select_new(parse_kernel_log(text), state)
    fragment: Fragment = {"xid_events": events}
    if source.live and state_dir:
        fragment["_xid_state"] = next_state(state, events)
    return fragment


def public(event: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in event.items() if not k.startswith("_")}
