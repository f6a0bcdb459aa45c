"""bench/fleet_netbox.py against a stand-in for NetBox's REST API (the few /api/dcim/ endpoints it calls, with
NetBox's list envelope, bulk POST / PATCH of lists and the filters it uses): the set-up creates what is missing
once, a second set-up creates nothing, and each measured call is answered."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from bench import fleet_netbox


class FakeNetBox:
    """Objects by endpoint; module bays appear with a device from its type's templates, as in NetBox."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict]] = {}
        self.posts = 0

    def _new(self, kind: str, row: dict) -> dict:
        table = self.rows.setdefault(kind, [])
        row = {**row, "id": len(table) + 1}
        table.append(row)
        if kind == "devices":
            for t in self.rows.get("module-bay-templates", []):
                if t["device_type"] == row["device_type"]:
                    self._new("module-bays", {"device": row["id"], "name": t["name"], "site": row["site"]})
        if kind == "modules":
            bay = next(b for b in self.rows["module-bays"] if b["id"] == row["module_bay"])
            bay["installed_module"] = {"id": row["id"]}
        return row

    @staticmethod
    def _out(kind: str, row: dict) -> dict:
        if kind in ("modules", "module-bays"):
            return {**row, "device": {"id": row["device"]}}
        return row

    def _site_of(self, kind: str, row: dict) -> int | None:
        if kind == "modules":
            return next(d["site"] for d in self.rows["devices"] if d["id"] == row["device"])
        return row.get("site")

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Token t0k3n"
        url = urlsplit(str(request.url))
        kind = url.path.removeprefix("/api/dcim/").strip("/")
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        if request.method == "POST":
            self.posts += 1
            body = json.loads(request.content)
            made = [self._new(kind, r) for r in (body if isinstance(body, list) else [body])]
            return httpx.Response(201, json=made if isinstance(body, list) else made[0])
        if request.method == "PATCH":
            by_id = {r["id"]: r for r in self.rows[kind]}
            for change in json.loads(request.content):
                by_id[change["id"]].update(change)
            return httpx.Response(200, json=[self._out(kind, by_id[c["id"]]) for c in json.loads(request.content)])
        rows = self.rows.get(kind, [])
        for key, value in query.items():
            if key in ("slug", "model", "serial"):
                rows = [r for r in rows if str(r.get(key)) == value]
            elif key == "device_type_id":
                rows = [r for r in rows if str(r["device_type"]) == value]
            elif key == "manufacturer_id":
                rows = [r for r in rows if str(r["manufacturer"]) == value]
            elif key == "site_id":
                rows = [r for r in rows if str(self._site_of(kind, r)) == value]
            elif key == "q":
                rows = [r for r in rows if value in r.get("serial", "")]
        limit, offset = int(query.get("limit", 50)), int(query.get("offset", 0))
        page = rows[offset : offset + limit]
        more = offset + limit < len(rows)
        nxt = f"http://netbox{url.path}?{url.query.split('&offset')[0]}&offset={offset + limit}" if more else None
        return httpx.Response(
            200, json={"count": len(rows), "next": nxt, "previous": None, "results": [self._out(kind, r) for r in page]}
        )


@pytest.fixture
def fake() -> FakeNetBox:
    return FakeNetBox()


def test_set_up_creates_the_fleet_once_then_the_calls_are_measured(fake):
    netbox = fleet_netbox.NetBox("http://netbox", "t0k3n", devices=30, transport=httpx.MockTransport(fake))
    netbox.prepare()
    assert len(fake.rows["devices"]) == 30
    assert len(fake.rows["module-bays"]) == 30 * 8
    assert len(fake.rows["modules"]) == 30 * 8
    assert len({m["serial"] for m in fake.rows["modules"]}) == 240  # a serial of its own for each module
    assert netbox.module_ids and all(len(ids) == 8 for ids in netbox.module_ids)

    posts = fake.posts
    again = fleet_netbox.NetBox("http://netbox", "t0k3n", devices=30, transport=httpx.MockTransport(fake))
    again.prepare()
    assert fake.posts == posts  # everything is found: nothing created twice

    for key in ("modules", "devices", "q", "serial", "patch"):
        result = again.measure(key, 2)
        assert result.p50_ms > 0 and result.rps_1 > 0
    described = {m["description"] for m in fake.rows["modules"] if m["id"] in again.module_ids[0]}
    assert len(described) == 1 and described.pop().startswith("driver ")
