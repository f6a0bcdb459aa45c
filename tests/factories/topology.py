"""Topologies as the agent reports them, for tests: an HGX-like node of `gpus` GPUs on NVLink and `nics` NICs,
GPU i next to NIC i % nics (PIX), everything else across the CPUs (SYS)."""

from __future__ import annotations

from typing import Any


def hgx_topology(
    gpus: int = 8,
    nics: int = 8,
    nvlink: str = "NV18",
    moved: dict[tuple[str, str], str] | None = None,
    nvlinks: int = 0,
    inactive: tuple[tuple[str, int], ...] = (),
) -> dict[str, Any]:
    """The report's `topology` object; `moved` overrides the kind of some pairs (a, b in device order). With
    `nvlinks`, each GPU carries that many NVLink states (`nvidia-smi nvlink -s`), those in `inactive` down."""
    names = [f"GPU{i}" for i in range(gpus)] + [f"NIC{i}" for i in range(nics)]
    devices: list[dict[str, Any]] = [
        {
            "name": f"GPU{i}",
            "type": "gpu",
            "alias": None,
            "cpu_affinity": "0-51" if i < gpus // 2 else "52-103",
            "numa_affinity": str(i * 2 // gpus),
        }
        for i in range(gpus)
    ] + [{"name": f"NIC{i}", "type": "nic", "alias": f"mlx5_{i}"} for i in range(nics)]
    links = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if b.startswith("GPU"):
                kind = nvlink
            elif a.startswith("GPU"):
                kind = "PIX" if int(a[3:]) % max(nics, 1) == int(b[3:]) else "SYS"
            else:
                kind = "SYS"
            kind = (moved or {}).get((a, b), kind)
            if kind is None:
                continue  # the pair is not printed at all
            link: dict[str, Any] = {"a": a, "b": b, "kind": kind}
            if b.startswith("NIC"):
                link["b_alias"] = f"mlx5_{b[3:]}"
            links.append(link)
    sources = ["nvidia-smi topo -m"]
    if nvlinks:
        sources.append("nvidia-smi nvlink -s")
        for device in devices[:gpus]:
            device["nvlinks"] = [
                {"link": i, "state": "inactive", "speed_gbps": None}
                if (device["name"], i) in inactive
                else {"link": i, "state": "active", "speed_gbps": 26.562}
                for i in range(nvlinks)
            ]
    return {"sources": sources, "devices": devices, "links": links}
