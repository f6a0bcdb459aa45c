"""With the real peers on loopback: Prometheus scrapes a captured dcgm-exporter page (served by a small HTTP
server) and gpuops' /metrics; the shipped DCGM Xid rule fires; the real Alertmanager posts to gpuops with the
alert source's bearer token; gpuops opens the repair ticket of the right card. Then the served page heals, the
alert resolves, and the resolved notification closes the health event.

Fast by configuration: scrape and evaluation every second, `for: 0s`, group_wait / group_interval 1 s.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cmdb import models as m
from integrations.monitoring.models import ReceivedAlert
from integrations.monitoring.services.sources import alert_source_add
from tests.conftest import wait_until
from tests.integrations.monitoring.conftest import UUID0, fleet_make, rules_ensure
from workflows.definitions.repair import dedup_key_for
from workflows.models import Ticket

pytestmark = [pytest.mark.peers, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[3]
CAPTURE = Path(__file__).parent / "data" / "dcgm-exporter-l4-xid79.txt"
DCGM_RULES = REPO / "deploy" / "prometheus" / "gpuops-dcgm.rules.yml"
SCRAPE_TOKEN = "e2e-scrape-token-5f1c"
HOST = "gpu-e2e01"


def _binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if path:
            return path
    pytest.skip(f"real peers: {names[0]} is not installed (apt-get install prometheus prometheus-alertmanager)")
    raise AssertionError  # unreachable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Exporter:
    """A static HTTP server standing in for dcgm-exporter: serves `text` at /metrics."""

    def __init__(self, text: str) -> None:
        self.text = text
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Peers:
    prometheus_url: str
    exporter: Exporter
    tmp: Path

    def query(self, expr: str) -> list[dict]:
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]["result"]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.tmp.glob("*.log")))


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    handle = log.open("w")
    return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def peers(live_server, tmp_path, settings) -> Iterator[Peers]:
    prometheus = _binary("prometheus")
    alertmanager = _binary("prometheus-alertmanager", "alertmanager")
    settings.GPUOPS_METRICS_TOKEN = SCRAPE_TOKEN
    settings.GPUOPS_METRICS_CACHE_SECONDS = 0
    rules_ensure()
    token = alert_source_add(name="alertmanager-e2e").token
    gpuops = urllib.parse.urlsplit(live_server.url)
    exporter = Exporter(CAPTURE.read_text())
    am_port, prom_port = _free_port(), _free_port()

    (tmp_path / "alertmanager.yml").write_text(
        json.dumps(  # JSON is YAML
            {
                "route": {
                    "receiver": "gpuops",
                    "group_by": ["alertname", "Hostname", "UUID"],
                    "group_wait": "1s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [
                    {
                        "name": "gpuops",
                        "webhook_configs": [
                            {
                                "url": f"{live_server.url}/api/integrations/alerts/alertmanager/",
                                "send_resolved": True,
                                "http_config": {"authorization": {"type": "Bearer", "credentials": token}},
                            }
                        ],
                    }
                ],
            }
        )
    )
    # The shipped rules, with every `for` at 0 s so the test does not wait minutes.
    (tmp_path / "dcgm.rules.yml").write_text(re.sub(r"for: \S+", "for: 0s", DCGM_RULES.read_text()))
    (tmp_path / "prometheus.yml").write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
                "rule_files": [str(tmp_path / "dcgm.rules.yml")],
                "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
                "scrape_configs": [
                    {"job_name": "dcgm", "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]},
                    {
                        "job_name": "gpuops",
                        "metrics_path": "/metrics",
                        "authorization": {"type": "Bearer", "credentials": SCRAPE_TOKEN},
                        "static_configs": [{"targets": [f"{gpuops.hostname}:{gpuops.port}"]}],
                    },
                ],
            }
        )
    )
    procs = [
        _start(
            [
                alertmanager,
                f"--config.file={tmp_path / 'alertmanager.yml'}",
                f"--storage.path={tmp_path / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",
            ],
            tmp_path / "alertmanager.log",
        ),
        _start(
            [
                prometheus,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'prom-data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                "--rules.alert.resend-delay=1s",
            ],
            tmp_path / "prometheus.log",
        ),
    ]
    found = Peers(prometheus_url=f"http://127.0.0.1:{prom_port}", exporter=exporter, tmp=tmp_path)
    try:
        ok = wait_until(
            lambda: _ready(f"http://127.0.0.1:{am_port}/-/ready") and _ready(f"{found.prometheus_url}/-/ready"),
            timeout=20,
        )
        assert ok, f"the peers did not start:\n{found.logs()}"
        yield found
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        exporter.close()


def test_a_dcgm_xid_79_alert_opens_the_repair_of_the_right_card_and_its_resolution_closes_the_event(peers):
    world = fleet_make(hostname=HOST)
    other = m.Accelerator.objects.exclude(pk=world.card0.pk).get(node=world.node)
    assert world.card0.uuid == UUID0  # the capture's card

    def repair() -> Ticket | None:
        return Ticket.objects.filter(dedup_key=dedup_key_for(world.card0.pk), is_open=True).first()

    def applied() -> bool:
        # The alert's row, its event and the ticket commit together; on SQLite the live server shares the test's
        # connection, so wait for the last write of the intake rather than for the ticket alone.
        return bool(repair()) and ReceivedAlert.objects.filter(health_event__accelerator=world.card0).exists()

    assert wait_until(applied, timeout=30), f"no repair ticket:\n{peers.logs()}"
    event = m.HealthEvent.objects.get(accelerator=world.card0)
    assert (event.kind, event.code, event.source, event.resolved_at) == ("xid", "79", "alertmanager", None)
    assert not Ticket.objects.filter(dedup_key=dedup_key_for(other.pk)).exists()
    alert = ReceivedAlert.objects.get(health_event=event)
    assert alert.labels["Hostname"] == HOST and alert.is_matched

    peers.exporter.text = CAPTURE.read_text().replace("} 79\n", "} 0\n")  # the card is fine again
    closed = wait_until(
        lambda: (
            m.HealthEvent.objects.filter(pk=event.pk, resolved_at__isnull=False).exists()
            and ReceivedAlert.objects.filter(health_event=event, status="resolved").exists()
        ),
        30,
    )
    assert closed, f"the event was not closed:\n{peers.logs()}"
    alert.refresh_from_db()
    assert alert.status == "resolved"
    assert repair() is not None  # the repair goes on: a card that fell off the bus is not healed by a quiet gauge


def test_prometheus_scrapes_gpuops_metrics(peers):
    fleet_make(hostname=HOST)
    m.Accelerator.objects.filter(uuid=UUID0).update(health="degraded")

    def scraped() -> list[dict]:
        up = peers.query('up{job="gpuops"}')
        return up if up and up[0]["value"][1] == "1" else []

    assert wait_until(scraped, timeout=20), f"gpuops was not scraped up:\n{peers.logs()}"
    expr = 'sum(gpuops_accelerators{job="gpuops",site="bj1",health="degraded",vendor="nvidia"})'
    assert wait_until(lambda: (r := peers.query(expr)) and r[0]["value"][1] == "1", timeout=20), peers.logs()
    nodes = peers.query('sum(gpuops_nodes{job="gpuops",site="bj1"})')
    assert nodes[0]["value"][1] == "1"
