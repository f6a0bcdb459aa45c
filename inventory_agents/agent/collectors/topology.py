"""Intra-node topology: `nvidia-smi topo -m`, `npu-smi info -t topo`, `rocm-smi --showtopo` / `hy-smi --showtopo`,
and the state of each NVLink from `nvidia-smi nvlink -s`.

The result is the report's top-level `topology` object:
  devices: [{name, type (gpu/npu/nic), alias (NIC0 -> mlx5_0 from the NIC legend), cpu_affinity, numa_affinity,
             gpu_numa_id, numa_node, nvlinks}]   (affinity keys only where the tool prints them; nvlinks:
             [{link, state (active/inactive), speed_gbps}] per GPU where `nvidia-smi nvlink -s` ran)
  links:   [{a, b, kind, [a_alias], [b_alias], [weight], [hops]}]  one per device pair the tool prints
  sources: the tools that produced it.

The matrices are read from their header: the column set (any number of GPUs and NICs, any NIC naming) and the
affinity columns come from the header line, never from a fixed layout. A matrix that does not add up (missing or
unknown row, short row, unknown link code, off-diagonal "X") raises ToolError naming the tool and the line, and
nothing of that tool's matrix is kept.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from ..runner import Source, ToolError
from . import Fragment

NVIDIA_NAME = "nvidia-smi-topo-m.txt"
NPU_NAME = "npu-smi-info-t-topo.txt"
HY_SMI_NAME = "hy-smi-showtopo.txt"
ROCM_SMI_NAME = "rocm-smi-showtopo.txt"

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ACCEL_RE = re.compile(r"^(GPU|NPU|DCU|HCU)\d+$|^Phy-ID\d+$")
_NV_RE = re.compile(r"^NV\d+$")
_LEGEND_CODE_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_#]*)\s*=\s*\S")
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# Link codes every supported version prints (SOC is SYS in drivers before R375); codes a newer tool declares in
# its own Legend are accepted too, so a new link kind is reported rather than rejected.
KNOWN_KINDS = {"SYS", "SOC", "NODE", "PHB", "PXB", "PIX", "HCCS", "HCCS_SW", "SIO", "NA", "XGMI", "PCIE"}
# Affinity columns after the device columns, as header phrases -> report keys.
AFFINITY_COLUMNS: Sequence[Tuple[Tuple[str, ...], str]] = (
    (("CPU", "Affinity"), "cpu_affinity"),
    (("NUMA", "Affinity"), "numa_affinity"),
    (("GPU", "NUMA", "ID"), "gpu_numa_id"),
)


def _device_type(name: str) -> str:
    if name.startswith("GPU") or name.startswith(("DCU", "HCU")):
        return "gpu"
    if name.startswith(("NPU", "Phy-ID")):
        return "npu"
    return "nic"


def _none_if_na(value: Optional[str]) -> Optional[str]:
    if value is None or value.strip() in ("", "N/A", "NA", "-"):
        return None
    return value.strip()


def _clean_lines(text: str) -> List[str]:
    return [_ANSI_RE.sub("", line).rstrip("\r\n") for line in text.splitlines()]


def _split_header(tokens: List[str], tool: str, lineno: int) -> Tuple[List[str], List[str]]:
    """(device column names, affinity keys) from the header tokens."""
    devices: List[str] = []
    index = 0
    starts = {phrase[0] for phrase, _key in AFFINITY_COLUMNS}
    while index < len(tokens):
        token = tokens[index]
        if token in starts and any(tuple(tokens[index : index + len(p)]) == p for p, _k in AFFINITY_COLUMNS):
            break
        devices.append(token)
        index += 1
    affinity: List[str] = []
    while index < len(tokens):
        for phrase, key in AFFINITY_COLUMNS:
            if tuple(tokens[index : index + len(phrase)]) == phrase:
                affinity.append(key)
                index += len(phrase)
                break
        else:
            raise ToolError("{}: unknown header column {!r} (line {})".format(tool, " ".join(tokens[index:]), lineno))
    if len(set(devices)) != len(devices):
        raise ToolError("{}: repeated device column in the header (line {})".format(tool, lineno))
    return devices, affinity


def _legends(lines: List[str]) -> Tuple[Set[str], Dict[str, str]]:
    """(link codes the Legend declares, NIC legend NICn -> device name)."""
    codes: Set[str] = set()
    nics: Dict[str, str] = {}
    section = None
    for line in lines:
        stripped = " ".join(line.split())
        if stripped == "Legend:":
            section = "codes"
            continue
        if stripped == "NIC Legend:":
            section = "nics"
            continue
        if section == "codes":
            match = _LEGEND_CODE_RE.match(line)
            if match:
                codes.add(match.group(1))
        elif section == "nics":
            match = _NIC_LEGEND_RE.match(line)
            if match:
                nics[match.group(1)] = match.group(2)
    return codes, nics


def parse_matrix(text: str, tool: str) -> Dict[str, Any]:
    """An `nvidia-smi topo -m` / `npu-smi info -t topo` matrix -> {devices, links}."""
    lines = _clean_lines(text)
    header_at = None
    for number, line in enumerate(lines):
        tokens = line.split()
        # The header is the first indented line naming accelerators (its first cell, the row-name column, is
        # blank); rows start at the margin.
        if tokens and line[:1] in (" ", "\t") and _ACCEL_RE.match(tokens[0]):
            header_at = number
            break
        if "Legend:" in line:
            break
    if header_at is None:
        raise ToolError("{}: not a topology matrix (no header row naming GPU0 / NPU0 ...)".format(tool))
    columns, affinity_keys = _split_header(lines[header_at].split(), tool, header_at + 1)
    if not columns:
        raise ToolError("{}: header without device columns (line {})".format(tool, header_at + 1))
    codes, nic_legend = _legends(lines[header_at + 1 :])
    allowed = KNOWN_KINDS | codes
    rows: Dict[str, Tuple[int, List[str], List[str]]] = {}
    for number in range(header_at + 1, len(lines)):
        line = lines[number]
        tokens = line.split()
        if not tokens:
            if rows:
                break
            continue
        if tokens[0] in ("Legend:", "NIC"):
            break
        name = tokens[0]
        lineno = number + 1
        if name not in columns:
            raise ToolError("{}: row {!r} is not a header column (line {})".format(tool, name, lineno))
        if name in rows:
            raise ToolError("{}: row {} printed twice (line {})".format(tool, name, lineno))
        cells = tokens[1 : 1 + len(columns)]
        extra = tokens[1 + len(columns) :]
        if len(cells) < len(columns):
            raise ToolError(
                "{}: row {} has {} of {} link cells, truncated or garbled (line {})".format(
                    tool, name, len(cells), len(columns), lineno
                )
            )
        if len(extra) > len(affinity_keys):
            raise ToolError("{}: row {} has {} cells too many (line {})".format(tool, name, len(extra), lineno))
        for column, cell in zip(columns, cells):  # noqa: B905 - same length by now; strict= is 3.10+
            if column == name:
                if cell != "X":
                    raise ToolError("{}: {} to itself is {!r}, not X (line {})".format(tool, name, cell, lineno))
            elif cell == "X" or not (cell in allowed or _NV_RE.match(cell)):
                raise ToolError(
                    "{}: unknown link code {!r} between {} and {} (line {})".format(tool, cell, name, column, lineno)
                )
        rows[name] = (lineno, cells, extra)
    missing = [name for name in columns if name not in rows]
    if missing:
        raise ToolError("{}: matrix without row(s) for {}, truncated".format(tool, ", ".join(missing)))
    devices = []
    for name in columns:
        device: Dict[str, Any] = {"name": name, "type": _device_type(name), "alias": nic_legend.get(name)}
        _lineno, _cells, extra = rows[name]
        if device["type"] != "nic":
            for key, value in zip(affinity_keys, extra + [None] * len(affinity_keys)):  # noqa: B905
                device[key] = _none_if_na(value)
        devices.append(device)
    _check_symmetric(columns, {name: (lineno, cells) for name, (lineno, cells, _e) in rows.items()}, tool)
    return {"devices": devices, "links": _links(columns, rows, nic_legend)}


def _check_symmetric(columns: List[str], rows: Dict[str, Tuple[int, List[str]]], tool: str) -> None:
    """Every pair is printed twice; two different answers mean a garbled capture, not a link to report."""
    for i, a in enumerate(columns):
        for j in range(i + 1, len(columns)):
            b = columns[j]
            there, back = rows[a][1][j], rows[b][1][i]
            if there != back:
                raise ToolError(
                    "{}: {}-{} printed as {} and as {} (line {})".format(tool, a, b, there, back, rows[b][0])
                )


def _links(
    columns: List[str], rows: Dict[str, Tuple[int, List[str], List[str]]], aliases: Dict[str, str]
) -> List[Dict[str, Any]]:
    """One link per unordered pair, read from the earlier row (the matrix is printed both ways)."""
    links = []
    for i, a in enumerate(columns):
        cells = rows[a][1]
        for j in range(i + 1, len(columns)):
            b = columns[j]
            link: Dict[str, Any] = {"a": a, "b": b, "kind": cells[j]}
            if a in aliases:
                link["a_alias"] = aliases[a]
            if b in aliases:
                link["b_alias"] = aliases[b]
            links.append(link)
    return links


# --------------------------------------------------------------------------------------------- rocm / hy-smi

_SECTION_RE = re.compile(r"^\s*=+\s*(.*?)\s*=+\s*$")
_NUMA_RE = re.compile(r"^\s*(GPU|DCU|HCU)\[(\d+)\]\s*:\s*\(Topology\)\s*Numa (Node|Affinity)\s*:\s*(\S+)", re.I)
_ROCM_KINDS = {"XGMI", "PCIE", "PCI", "NA", "N/A"}


def _rocm_table(
    lines: List[Tuple[int, str]], tool: str, title: str
) -> Tuple[List[str], Dict[str, Tuple[int, List[str]]]]:
    columns: List[str] = []
    rows: Dict[str, Tuple[int, List[str]]] = {}
    for lineno, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if not columns:
            if not all(_ACCEL_RE.match(t) for t in tokens):
                raise ToolError("{}: {} table without a header of devices (line {})".format(tool, title, lineno))
            columns = tokens
            continue
        name = tokens[0]
        if name not in columns or name in rows:
            raise ToolError("{}: unexpected row {!r} in the {} table (line {})".format(tool, name, title, lineno))
        if len(tokens) != len(columns) + 1:
            raise ToolError(
                "{}: row {} of the {} table has {} of {} cells (line {})".format(
                    tool, name, title, len(tokens) - 1, len(columns), lineno
                )
            )
        rows[name] = (lineno, tokens[1:])
    missing = [name for name in columns if name not in rows]
    if not columns or missing:
        raise ToolError("{}: {} table without row(s) for {}".format(tool, title, ", ".join(missing) or "any device"))
    return columns, rows


def parse_rocm_topo(text: str, tool: str) -> Dict[str, Any]:
    """`rocm-smi --showtopo` / `hy-smi --showtopo`: weight, hops and link-type tables, then NUMA lines."""
    sections: Dict[str, List[Tuple[int, str]]] = {}
    current: Optional[str] = None
    numa: Dict[str, Dict[str, Optional[str]]] = {}
    for number, line in enumerate(_clean_lines(text)):
        header = _SECTION_RE.match(line)
        if header:
            current = header.group(1).lower()
            sections.setdefault(current, [])
            continue
        match = _NUMA_RE.match(line)
        if match:
            key = "numa_node" if match.group(3).lower() == "node" else "numa_affinity"
            numa.setdefault("{}{}".format(match.group(1).upper(), match.group(2)), {})[key] = _none_if_na(
                match.group(4)
            )
            continue
        if current is not None:
            sections[current].append((number + 1, line))
    found = {}
    for title in sections:
        for key in ("weight", "hops", "link type"):
            if title.startswith(key):
                found[key] = title
    if "link type" not in found:
        raise ToolError("{}: no 'Link Type between two GPUs' table".format(tool))
    columns, kinds = _rocm_table(sections[found["link type"]], tool, "link type")
    extra: Dict[str, Dict[str, Tuple[int, List[str]]]] = {}
    for key in ("weight", "hops"):
        if key in found:
            other_columns, table = _rocm_table(sections[found[key]], tool, key)
            if other_columns != columns:
                raise ToolError("{}: the {} table names other devices than the link type table".format(tool, key))
            extra[key] = table
    links = []
    for i, a in enumerate(columns):
        lineno, cells = kinds[a]
        for j in range(len(columns)):
            cell = cells[j]
            if i == j:
                if cell not in ("0", "X"):
                    raise ToolError("{}: {} to itself is {!r} (line {})".format(tool, a, cell, lineno))
                continue
            if cell.upper() not in _ROCM_KINDS:
                raise ToolError(
                    "{}: unknown link type {!r} between {} and {} (line {})".format(tool, cell, a, columns[j], lineno)
                )
            link: Dict[str, Any] = {"a": a, "b": columns[j], "kind": cell}
            for key, table in extra.items():
                value_line, values = table[a]
                value = values[j]
                if value.upper() in ("N/A", "NA"):
                    link[key] = None
                elif value.isdigit():
                    link[key] = int(value)
                else:
                    raise ToolError(
                        "{}: {} {!r} between {} and {} is not a number (line {})".format(
                            tool, key, value, a, columns[j], value_line
                        )
                    )
            if j > i:
                links.append(link)
    _check_symmetric(columns, kinds, tool)
    devices = []
    for name in columns:
        device: Dict[str, Any] = {"name": name, "type": _device_type(name), "alias": None}
        index = re.sub(r"^\D+", "", name)
        for prefix in ("GPU", "DCU", "HCU"):
            if prefix + index in numa:
                device.update(numa[prefix + index])
                break
        devices.append(device)
    return {"devices": devices, "links": links}


# --------------------------------------------------------------------------------------- nvidia-smi nvlink -s

NVLINK_NAME = "nvidia-smi-nvlink-s.txt"
NVLINK_TOOL = "nvidia-smi nvlink -s"
# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; the UUID is absent on some old drivers.
_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]*)\))?$")
# "Link 0: 26.562 GB/s" (R450 and later), "Link 0: 25 GB/s" (older), "Link 3: <inactive>" / "inactive".
_NVLINK_LINK_RE = re.compile(r"^Link (\d+): (?:(\d+(?:\.\d+)?) GB/s|<?(inactive)>?)$", re.I)
# Lines some drivers print around the table that say nothing about a link.
_NVLINK_NOISE_RE = re.compile(r"^(NVLink is not supported|NVLINK is not supported|No NVLinks? found)", re.I)


def parse_nvlink_status(text: str, tool: str = NVLINK_TOOL) -> Dict[str, List[Dict[str, Any]]]:
    """`nvidia-smi nvlink -s` -> {"GPU0": [{"link": 0, "state": "active", "speed_gbps": 26.562}, {"link": 3,
    "state": "inactive", "speed_gbps": None}], ...}. A GPU without NVLink maps to []. Anything else in the
    output - a link line before any GPU, an unreadable line, a link listed twice, a speed without its unit, a last
    GPU cut short (fewer links than the GPU before it) - raises ToolError naming the tool and the line."""
    gpus: Dict[str, List[Dict[str, Any]]] = {}
    current: Optional[str] = None
    last_line = 0
    for number, raw in enumerate(_clean_lines(text), start=1):
        line = " ".join(raw.split())
        if not line or _NVLINK_NOISE_RE.match(line):
            continue
        header = _NVLINK_GPU_RE.match(line)
        if header:
            current = "GPU" + header.group(1)
            if current in gpus:
                raise ToolError("{}: {} listed twice (line {})".format(tool, current, number))
            gpus[current] = []
            last_line = number
            continue
        link = _NVLINK_LINK_RE.match(line)
        if link is None:
            raise ToolError("{}: unreadable line {!r} (line {})".format(tool, line[:80], number))
        if current is None:
            raise ToolError("{}: a link before any GPU header (line {})".format(tool, number))
        index = int(link.group(1))
        if any(entry["link"] == index for entry in gpus[current]):
            raise ToolError("{}: {} link {} listed twice (line {})".format(tool, current, index, number))
        speed = float(link.group(2)) if link.group(2) is not None else None
        gpus[current].append({"link": index, "state": "inactive" if link.group(3) else "active", "speed_gbps": speed})
        last_line = number
    if not gpus:
        raise ToolError("{}: no GPU header (not nvlink status output)".format(tool))
    counts = [len(links) for links in gpus.values()]
    if len(counts) > 1 and counts[-1] < counts[-2]:
        name = list(gpus)[-1]
        raise ToolError(
            "{}: output cut short: {} lists {} links, the GPU before it {} (line {})".format(
                tool, name, counts[-1], counts[-2], last_line
            )
        )
    return gpus


def _with_nvlinks(
    devices: List[Dict[str, Any]], nvlinks: Dict[str, List[Dict[str, Any]]], tool: str
) -> List[Dict[str, Any]]:
    """The matrix's devices with each GPU's `nvlinks`; GPUs the matrix lacks are an error (a capture of another
    node, or of a GPU that fell off the bus between the two commands). Without a matrix: one device per GPU."""
    if not devices:
        return [{"name": name, "type": "gpu", "alias": None, "nvlinks": links} for name, links in nvlinks.items()]
    names = {d["name"] for d in devices}
    unknown = [name for name in nvlinks if name not in names]
    if unknown:
        raise ToolError("{}: {} not in the topology matrix".format(tool, ", ".join(unknown)))
    return [dict(d, nvlinks=nvlinks[d["name"]]) if d["name"] in nvlinks else d for d in devices]


# --------------------------------------------------------------------------------------------- collector

_NO_DEVICES_RE = re.compile(r"^\s*No devices (were )?found", re.I | re.M)
TOOLS: Sequence[Tuple[str, str, Any]] = (
    (NVIDIA_NAME, "nvidia-smi topo -m", parse_matrix),
    (NPU_NAME, "npu-smi info -t topo", parse_matrix),
    (HY_SMI_NAME, "hy-smi --showtopo", parse_rocm_topo),
    (ROCM_SMI_NAME, "rocm-smi --showtopo", parse_rocm_topo),
)


def collect(source: Source) -> Fragment:
    """{'topology': {...}} from every topology tool present; a tool whose output does not parse is an error and
    contributes nothing (never half a matrix)."""
    devices: List[Dict[str, Any]] = []
    links: List[Dict[str, Any]] = []
    sources: List[str] = []
    errors: List[Dict[str, str]] = []
    seen: Set[str] = set()
    for name, tool, parser in TOOLS:
        try:
            text = source.output(name)
            if text is None or not text.strip() or _NO_DEVICES_RE.search(text):
                continue  # no tool, or no card: the accelerator collectors report that
            if parser is parse_rocm_topo and sources and sources[-1] == "hy-smi --showtopo":
                continue  # hy-smi and rocm-smi print the same DTK tables: one is enough
            parsed = parser(text, tool)
        except ToolError as exc:
            errors.append({"collector": "topology", "error": str(exc)})
            continue
        clash = seen.intersection(d["name"] for d in parsed["devices"])
        if clash:
            errors.append(
                {"collector": "topology", "error": "{}: devices {} already reported".format(tool, sorted(clash))}
            )
            continue
        seen.update(d["name"] for d in parsed["devices"])
        devices.extend(parsed["devices"])
        links.extend(parsed["links"])
        sources.append(tool)
    try:
        text = source.output(NVLINK_NAME)
        if text is not None and text.strip() and not _NO_DEVICES_RE.search(text):
            devices = _with_nvlinks(devices, parse_nvlink_status(text), NVLINK_TOOL)
            sources.append(NVLINK_TOOL)
    except ToolError as exc:
        errors.append({"collector": "topology", "error": str(exc)})  # the matrix stands, without link states
    fragment: Fragment = {"collector_errors": errors}
    if sources:
        fragment["topology"] = {"sources": sources, "devices": devices, "links": links}
    return fragment
