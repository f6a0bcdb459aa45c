"""NetBox's side of bench/fleet_bench.py --compare: a fleet of HGX servers modelled the NetBox way, and the calls
equivalent to gpuops's hot paths, through NetBox's REST API (4.x: /api/dcim/...).

The model: one site, manufacturer and device role; an HGX device type with 8 module bays (module bay templates
GPU0..GPU7, so every device gets its bays on creation); a GPU module type; DEVICES devices, each with a GPU
module with a serial in each bay. What is there already (by slug / name / serial) is reused, so a second run
measures at once. Writes are bulk (a list in one POST), as a careful importer would do them.

The equivalents measured:
    modules  GET /api/dcim/modules/?limit=1000            (gpuops: list 1,000 accelerators with context)
    devices  GET /api/dcim/devices/?limit=1000            (gpuops: list 1,000 nodes)
    q        GET /api/dcim/modules/?q=<serial>            (gpuops: ?q=)
    serial   GET /api/dcim/modules/?serial=<serial>       (gpuops: ?serial=)
    patch    PATCH /api/dcim/modules/ with 8 modules      (gpuops: an agent report changing all 8 cards)
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

import httpx

DEVICES = 1_000
BAYS = 8
SLUG = "gpuops-bench"
SERIAL_PREFIX = "NBGPU"


class NetBoxError(SystemExit):
    pass


class NetBox:
    def __init__(
        self, url: str, token: str, devices: int = DEVICES, transport: httpx.BaseTransport | None = None
    ) -> None:
        scheme = "Bearer" if token.startswith("nbt_") else "Token"  # v2 tokens (nbt_<key>.<secret>) or v1
        self.headers = {"Authorization": f"{scheme} {token}", "Accept": "application/json"}
        self.url = url.rstrip("/")
        self.devices = devices
        self.module_ids: list[list[int]] = []  # the 8 module ids of a few devices, for the PATCH phase
        self.serial = ""
        self._flip = itertools.count()
        self.transport = transport  # a test's stand-in; None: the network

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=300, transport=self.transport)

    # --- set-up ---------------------------------------------------------------------------------------------------

    def _call(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
        response = client.request(method, path, **kwargs)
        if response.status_code >= 300:
            raise NetBoxError(f"NetBox {method} {path} -> {response.status_code}: {response.text[:500]}")
        return response.json() if response.content else None

    def _get_or_create(self, client: httpx.Client, path: str, lookup: dict[str, str], body: dict[str, Any]) -> int:
        found = self._call(client, "GET", path, params={**lookup, "brief": 1})
        if found["count"]:
            return found["results"][0]["id"]
        return self._call(client, "POST", path, json=body)["id"]

    def _all(self, client: httpx.Client, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        page = self._call(client, "GET", path, params={**params, "limit": 1000})
        while True:
            rows += page["results"]
            if not page["next"]:
                return rows
            page = self._call(client, "GET", page["next"])

    def prepare(self) -> None:
        """Create what is missing: site, manufacturer, role, types, devices, modules."""
        with self.client() as c:
            site = self._get_or_create(
                c, "/api/dcim/sites/", {"slug": SLUG}, {"name": "gpuops bench", "slug": SLUG, "status": "active"}
            )
            maker = self._get_or_create(
                c, "/api/dcim/manufacturers/", {"slug": SLUG}, {"name": "gpuops bench vendor", "slug": SLUG}
            )
            role = self._get_or_create(
                c,
                "/api/dcim/device-roles/",
                {"slug": SLUG},
                {"name": "gpuops bench GPU", "slug": SLUG, "color": "76b900"},
            )
            device_type = self._get_or_create(
                c,
                "/api/dcim/device-types/",
                {"slug": SLUG},
                {"manufacturer": maker, "model": "HGX H100 8-GPU (bench)", "slug": SLUG, "u_height": 8},
            )
            bays = self._call(c, "GET", "/api/dcim/module-bay-templates/", params={"device_type_id": device_type})
            if bays["count"] < BAYS:
                have = {b["name"] for b in bays["results"]}
                self._call(
                    c,
                    "POST",
                    "/api/dcim/module-bay-templates/",
                    json=[
                        {"device_type": device_type, "name": f"GPU{i}", "position": str(i)}
                        for i in range(BAYS)
                        if f"GPU{i}" not in have
                    ],
                )
            module_type = self._get_or_create(
                c,
                "/api/dcim/module-types/",
                {"model": "H100-SXM5-80GB (bench)", "manufacturer_id": str(maker)},
                {"manufacturer": maker, "model": "H100-SXM5-80GB (bench)"},
            )
            existing = self._call(c, "GET", "/api/dcim/devices/", params={"site_id": site, "brief": 1, "limit": 1})
            for start in range(existing["count"], self.devices, 250):
                batch = range(start, min(self.devices, start + 250))
                self._call(
                    c,
                    "POST",
                    "/api/dcim/devices/",
                    json=[
                        {
                            "name": f"bench-hgx-{n:05d}",
                            "device_type": device_type,
                            "role": role,
                            "site": site,
                            "status": "active",
                            "serial": f"NBSYS{n:07d}",
                        }
                        for n in batch
                    ],
                )
            modules = self._call(c, "GET", "/api/dcim/modules/", params={"site_id": site, "brief": 1, "limit": 1})
            if modules["count"] < self.devices * BAYS:
                self._modules_create(c, site, module_type)
            first = self._call(
                c, "GET", "/api/dcim/modules/", params={"site_id": site, "limit": 8 * 8, "ordering": "id"}
            )["results"]
            by_device: dict[int, list[int]] = {}
            for m in first:
                by_device.setdefault(m["device"]["id"], []).append(m["id"])
            self.module_ids = [ids for ids in by_device.values() if len(ids) == BAYS][:4]
            self.serial = first[0]["serial"]
            if not self.module_ids:
                raise NetBoxError("NetBox: no device with 8 modules after set-up")

    def _modules_create(self, c: httpx.Client, site: int, module_type: int) -> None:
        """A module in every empty bay of the bench site's devices (serials from the device and bay names)."""
        bays = self._all(c, "/api/dcim/module-bays/", {"site_id": site})
        empty = [b for b in bays if not b.get("installed_module")]
        for start in range(0, len(empty), 500):
            self._call(
                c,
                "POST",
                "/api/dcim/modules/",
                json=[
                    {
                        "device": b["device"]["id"],
                        "module_bay": b["id"],
                        "module_type": module_type,
                        "status": "active",
                        "serial": f"{SERIAL_PREFIX}{b['device']['id']:06d}{b['name'][-1]}",
                    }
                    for b in empty[start : start + 500]
                ],
            )

    # --- measurement ----------------------------------------------------------------------------------------------

    def requests_for(self, key: str) -> tuple[str, str, Any]:
        """(method, path, JSON body) of one request of phase `key`."""
        if key == "modules":
            return "GET", "/api/dcim/modules/?limit=1000", None
        if key == "devices":
            return "GET", "/api/dcim/devices/?limit=1000", None
        if key == "q":
            return "GET", f"/api/dcim/modules/?q={self.serial}", None
        if key == "serial":
            return "GET", f"/api/dcim/modules/?serial={self.serial}", None
        if key == "patch":
            n = next(self._flip)
            ids = self.module_ids[n % len(self.module_ids)]
            # The equivalent of a driver change on 8 cards: one field of each of the 8 modules, in one request.
            body = [{"id": pk, "description": f"driver {'570.133.20' if n % 2 else '550.127.05'}"} for pk in ids]
            return "PATCH", "/api/dcim/modules/", body
        raise KeyError(key)

    def measure(self, key: str, requests: int) -> NetBoxResult:
        """One warm-up, then `requests` requests from one client: p50, p95, requests per second."""
        import time

        latencies = []
        with self.client() as c:
            for i in range(requests + 1):
                method, path, body = self.requests_for(key)
                began = time.perf_counter()
                response = c.request(method, path, json=body)
                _ = response.content
                if i:
                    latencies.append(time.perf_counter() - began)
                if response.status_code >= 300:
                    raise NetBoxError(f"NetBox {method} {path} -> {response.status_code}: {response.text[:300]}")
        ordered = sorted(latencies)
        return NetBoxResult(
            key=key,
            p50_ms=statistics.median(latencies) * 1000,
            p95_ms=ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))] * 1000,
            rps_1=len(latencies) / sum(latencies),
        )


class NetBoxResult:
    def __init__(self, key: str, p50_ms: float, p95_ms: float, rps_1: float) -> None:
        self.key, self.p50_ms, self.p95_ms, self.rps_1 = key, p50_ms, p95_ms, rps_1
