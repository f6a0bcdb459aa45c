"""deploy/: the shipped Prometheus rules pass `promtool check rules` (and the Xid rule fires with the Xid as a
label, as gpuops' rule table expects), the Alertmanager example passes `amtool check-config`, and every gpuops
metric the rules and the Grafana dashboard use is one /metrics serves."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
RULES = sorted((DEPLOY / "prometheus").glob("*.rules.yml"))


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: prometheus / prometheus-alertmanager)")
    return path


def test_promtool_checks_the_shipped_rules():
    assert RULES
    result = subprocess.run([_tool("promtool"), "check", "rules", *map(str, RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_xid_rule_fires_with_the_xid_label_gpuops_reads(tmp_path):
    test = tmp_path / "xid_test.yml"
    test.write_text(
        textwrap.dedent(
            f"""
            rule_files: ["{DEPLOY / "prometheus" / "gpuops-dcgm.rules.yml"}"]
            evaluation_interval: 1m
            tests:
              - interval: 1m
                input_series:
                  - series: 'DCGM_FI_DEV_XID_ERRORS{{gpu="0",UUID="GPU-1",Hostname="gpu-a01"}}'
                    values: "0 79 79"
                alert_rule_test:
                  - eval_time: 2m
                    alertname: DCGMXidError
                    exp_alerts:
                      - exp_labels: {{severity: critical, xid: "79", gpu: "0", UUID: GPU-1, Hostname: gpu-a01}}
                        exp_annotations:
                          summary: "Xid 79 on GPU 0 (GPU-1) of gpu-a01"
                          value: "79"
            """
        )
    )
    result = subprocess.run([_tool("promtool"), "test", "rules", str(test)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_amtool_checks_the_alertmanager_example():
    config = DEPLOY / "alertmanager" / "alertmanager.yml"
    result = subprocess.run([_tool("amtool"), "check-config", str(config)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/api/integrations/alerts/alertmanager/" in config.read_text()


def _served_names(client, settings) -> set[str]:
    settings.GPUOPS_METRICS_TOKEN = "t"
    settings.GPUOPS_METRICS_CACHE_SECONDS = 0
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
    return names


@pytest.mark.django_db
def test_dashboard_and_rules_use_only_served_metrics(client, settings):
    dashboard = json.loads((DEPLOY / "grafana" / "gpuops-fleet.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    text = " ".join(exprs) + " ".join(p.read_text() for p in RULES)
    used = set(re.findall(r"\bgpuops_[a-z_]+", text))
    # Histogram and counter series carry suffixes; zero-sample families (a histogram never observed) still
    # have their HELP line, so compare family names too.
    served = _served_names(client, settings)
    missing = {n for n in used if n not in served and re.sub(r"_(bucket|total|count|sum)$", "", n) not in served}
    assert not missing, missing
