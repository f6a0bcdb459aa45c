"""Round trip: the real agent (`python -m inventory_agents.agent collect --from-dir DIR`) -> endpoint -> CMDB."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cmdb import models as m
from inventory_agents.services.tokens import agent_token_issue
from tests.factories.cmdb import AcceleratorModelFactory, NodeFactory, VendorFactory

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[3]
AGENT_DATA = REPO / "tests" / "inventory_agents" / "agent" / "data"


def _collect(folder: Path, tmp_path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inventory_agents.agent",
            "collect",
            "--from-dir",
            str(folder),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _folder(tmp_path: Path, *parts: Path, files: dict[str, Path] | None = None) -> Path:
    target = tmp_path / "captures"
    for part in parts:
        shutil.copytree(part, target, dirs_exist_ok=True)
    for name, source in (files or {}).items():
        shutil.copyfile(source, target / name)
    return target


def test_nvidia_node_round_trip(tmp_path, post, shared_fixtures, failed_calls):
    model = AcceleratorModelFactory(name="A100-SXM4-80GB", aliases=["NVIDIA A100-SXM4-80GB"])
    folder = _folder(
        tmp_path,
        AGENT_DATA / "node-common",
        files={
            "nvidia-smi-q-x.xml": shared_fixtures
            / "nvidia-smi-xml"
            / "telegraf_a100-sxm4-80gb_4gpu_mig_driver535_v12.xml",
            "dmidecode.txt": shared_fixtures / "dmidecode" / "netboxagent_supermicro-sys-5039ms-h12trf.txt",
        },
    )
    report = _collect(folder, tmp_path)
    # The CMDB keeps the short name; the agent reports the FQDN.
    node = NodeFactory(hostname=report["hostname"].split(".")[0], serial=report["system"]["serial"])
    token = agent_token_issue(node=node).token
    response = post(report, token)
    assert response.status_code == 200, response.json()
    listed = [c for c in report["accelerators"] if c.get("seen_by_tool") is not False]
    cards = m.Accelerator.objects.filter(node=node)
    assert cards.count() == len(listed) >= 1
    assert {c.serial for c in cards} == {c["serial"] for c in listed}
    assert all(c.model == model and c.lifecycle == "installed" for c in cards)
    node.refresh_from_db()
    assert node.os_name == report["system"]["os_pretty_name"] and node.kernel == report["system"]["kernel"]
    assert node.memory_gib == round(report["system"]["memory_gib"])
    # Xid 94 on a listed card fails it (Xid 13 alone would only degrade it); the Xid 79 of the GPU nvidia-smi lost
    # has no CMDB card yet.
    assert cards.get(serial=listed[0]["serial"]).health == "failed"
    assert m.HealthEvent.objects.filter(node=node, kind="xid", code="79", accelerator__isnull=True).exists()
    hcas = {n.name: n for n in m.Nic.objects.filter(node=node)}
    assert {h["ca"] for h in report["infiniband"]} <= set(hcas)
    assert hcas["mlx5_bond_0"].kind == "roce" and hcas["mlx5_0"].kind == "infiniband"
    assert m.NicPort.objects.get(nic=hcas["mlx5_0"]).guid == report["infiniband"][0]["ports"][0]["port_guid"]
    assert "bond0" not in hcas and "docker0" not in hcas
    installed = dict(m.InstalledSoftware.objects.filter(node=node).values_list("component", "version"))
    assert installed == {s["component"]: s["version"] for s in report["software"]}
    # The agent's next run with nothing new (its Xid state moved on) is the cheap path.
    again = _collect(folder, tmp_path)
    assert post(again, token).json()["status"] in ("unchanged", "applied")


def test_hygon_node_round_trip(tmp_path, post):
    hygon = VendorFactory(slug="hygon", name="Hygon")
    AcceleratorModelFactory(name="Hygon K100", vendor=hygon, aliases=["K100", "K100_AI", "BW200"])
    folder = _folder(tmp_path, AGENT_DATA / "node-common", AGENT_DATA / "hygon-k100")
    (folder / "kernel-log.txt").unlink()  # no NVIDIA Xids on a DCU node
    report = _collect(folder, tmp_path)
    node = NodeFactory(hostname=report["hostname"])
    token = agent_token_issue(node=node).token
    response = post(report, token)
    assert response.status_code == 200, response.json()
    cards = m.Accelerator.objects.filter(node=node)
    assert cards.count() == len(report["accelerators"]) >= 1
    assert {c.model.name for c in cards} == {"Hygon K100"}  # "K100_AI" is one of its aliases
    assert {c.uuid for c in cards} == {c["uuid"] for c in report["accelerators"]}  # 0x... unique ids kept
    assert m.InstalledSoftware.objects.filter(node=node, component="hygon-driver").exists()
    # Same output again: nothing changes.
    records = m.ChangeRecord.objects.count()
    assert post(report, token).json()["status"] == "unchanged"
    assert m.ChangeRecord.objects.count() == records
