"""Fixtures for the switches tests: a real snmpsim agent serving the recorded switches, and CMDB objects."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SHARED_FIXTURES = Path(os.environ.get("GPUOPS_SHARED_FIXTURES", REPO.parent / "shared" / "fixtures"))
SNMPREC_DIR = SHARED_FIXTURES / "snmprec"
SCRIPT = REPO / "script" / "snmpsim"
SYSTEM_PYTHON = Path(os.environ.get("GPUOPS_SNMPSIM_PYTHON", "/usr/bin/python3"))


@dataclass(frozen=True)
class SnmpSim:
    host: str
    port: int
    communities: tuple[str, ...]


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _answers(port: int, community: str) -> bool:
    from pysnmp.hlapi.v3arch.asyncio import (
        CommunityData,
        ContextData,
        ObjectIdentity,
        ObjectType,
        SnmpEngine,
        UdpTransportTarget,
        get_cmd,
    )

    engine = SnmpEngine()
    try:
        transport = await UdpTransportTarget.create(("127.0.0.1", port), timeout=0.5, retries=0)
        indication, status, _, _ = await get_cmd(
            engine,
            CommunityData(community),
            transport,
            ContextData(),
            ObjectType(ObjectIdentity("1.3.6.1.2.1.1.1.0")),
            lookupMib=False,
        )
        return not indication and not status
    finally:
        engine.close_dispatcher()


@pytest.fixture(scope="session")
def snmpsim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SnmpSim]:
    """A real snmpsim agent on 127.0.0.1:<free port> serving ../shared/fixtures/snmprec (one community per
    recording). Skips with a one-line reason when the recordings or /usr/bin/python3 are absent."""
    if not SNMPREC_DIR.is_dir():
        pytest.skip(f"snmpsim: recordings folder {SNMPREC_DIR} is absent")
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"snmpsim: {SYSTEM_PYTHON} is missing (the simulator venv is built from it)")
    prepare = subprocess.run([str(SCRIPT), "--prepare"], capture_output=True, text=True, timeout=300)
    if prepare.returncode != 0:
        last = (prepare.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"snmpsim: script/snmpsim --prepare failed: {last}")
    communities = tuple(sorted(p.stem for p in SNMPREC_DIR.glob("*.snmprec")))
    port = _free_udp_port()
    log_path = tmp_path_factory.mktemp("snmpsim") / "responder.log"
    with log_path.open("w") as log:
        # Own session, so teardown can signal the script and the responder together.
        proc = subprocess.Popen(
            [str(SCRIPT), str(SNMPREC_DIR), str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"snmpsim exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
            if asyncio.run(_answers(port, communities[0])):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"snmpsim did not answer within 60 s: {log_path.read_text()[-2000:]}")
            time.sleep(0.2)
        yield SnmpSim(host="127.0.0.1", port=port, communities=communities)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def fabric_site(db):
    from cmdb.models import Site, Vendor

    site = Site.objects.create(code="t1", name="Test site")
    vendor = Vendor.objects.create(slug="arista", name="Arista")
    return site, vendor
