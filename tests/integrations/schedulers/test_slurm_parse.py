"""Slurm output parsing on every real capture in ../shared/fixtures/slurm, and on the adapter's own formats."""

from __future__ import annotations

import datetime as dt

import pytest

from integrations.exceptions import PermanentError
from integrations.schedulers.slurm_parse import (
    hostlist_expand,
    sacct_parse,
    sacct_table_parse,
    scontrol_allocation_parse,
    scontrol_jobs_parse,
    scontrol_nodes_parse,
    sinfo_allocation_parse,
    sinfo_nodes_parse,
    slurm_state_parse,
    squeue_parse,
    table_parse,
)
from tests.conftest import SHARED_FIXTURES

SLURM = SHARED_FIXTURES / "slurm"
FILES = {path.name for path in SLURM.glob("*.txt")}
PARSED: set[str] = set()


def fixture(name: str) -> str:
    if not SLURM.is_dir():
        pytest.skip(f"real captures folder {SLURM} is absent")
    PARSED.add(name)
    return (SLURM / name).read_text()


def test_scontrol_multi_line_drained_gpu_node_keeps_the_reason_with_its_stamp():
    (node,) = scontrol_nodes_parse(fixture("awsomeai-issue195_scontrol-show-node_idle-drain-gres.txt"))
    assert node.name == "yigou-dev-102-68"
    assert node.state == "IDLE+DRAIN" and node.is_drained and not node.is_schedulable
    assert node.reason == "gres/gpu count reported lower than configured (0 < 1)"


def test_scontrol_several_multi_line_records_down_and_maintenance():
    nodes = scontrol_nodes_parse(fixture("pcluster_scontrol-show-nodes_down-reboot-issued.txt"))
    assert [n.name for n in nodes] == [
        "queue1-st-compute-resource-1-1",
        "queue1-st-compute-resource-1-2",
        "queue1-st-crt2micro-1",
    ]
    down = nodes[0]
    assert down.state == "DOWN+CLOUD+REBOOT_ISSUED" and not down.is_schedulable and down.is_drained
    assert down.reason == "Reboot ASAP : reboot issued"
    assert nodes[2].state == "IDLE+CLOUD+MAINTENANCE+RESERVED" and nodes[2].is_schedulable


def test_scontrol_one_line_per_node_with_spaces_in_os():
    nodes = scontrol_nodes_parse(fixture("slurmexporter_slurm-26.05.2_scontrol-show-nodes-o.txt"))
    assert len(nodes) == 20
    assert {n.name for n in nodes} >= {"na1", "na10", "nb1", "nb10"}
    na1 = next(n for n in nodes if n.name == "na1")
    assert na1.state == "MIXED+DYNAMIC_NORM" and na1.is_schedulable and not na1.is_drained
    text = fixture("slurmexporter_slurm-26.05.2_scontrol-show-nodes-o.txt")
    assert slurm_state_parse("nb3", text).name == "nb3"
    with pytest.raises(PermanentError):
        slurm_state_parse("absent", text)


def test_reason_holding_key_value_text_is_kept_whole():
    line = "NodeName=n1 State=MIXED+DRAIN Reason=REP-7: swap GPU slot=3 [gpuops@2026-12-01T10:00:00] Comment=x"
    state = slurm_state_parse("n1", line)
    assert state.reason == "REP-7: swap GPU slot=3" and not state.is_drained and not state.is_schedulable


def test_scontrol_show_job():
    (job,) = scontrol_jobs_parse(fixture("goose-issue32_scontrol-show-job.txt"))
    assert (job.job_id, job.state, job.user, job.partition, job.nodes) == (
        "10804568", "RUNNING", "tdegeus", "serial", ("f006",)
    )  # fmt: skip
    assert job.name == "velocity_python_PinAndTrigger.py-00"
    assert job.start_at == dt.datetime(2021, 8, 9, 14, 30, 18)


def test_sacct_long_table_keeps_allocations_only():
    (job,) = sacct_table_parse(fixture("goose_sacct-l-j.txt"))
    assert (job.job_id, job.name, job.partition, job.state) == ("11751427", "collect", "serial", "COMPLETED")


def test_sinfo_default_table_and_host_lists():
    rows = table_parse(fixture("hpccarpentry_graham_sinfo.txt"))
    assert len(rows) == 9
    by_state = {row["STATE"]: row for row in rows}
    assert hostlist_expand(by_state["drain*"]["NODELIST"]) == ["gra259"]
    assert hostlist_expand(by_state["down"]["NODELIST"]) == ["gra20", "gra801", "gra937"]
    assert len(hostlist_expand(by_state["drain"]["NODELIST"])) == 33 == int(by_state["drain"]["NODES"])
    drng = sinfo_nodes_parse(f"gra272|{by_state['drng']['STATE']}|REP-1: x")[0]
    assert drng.state == "drng" and not drng.is_drained and not drng.is_schedulable


def test_sinfo_list_reasons_free_text_column():
    (row,) = table_parse(fixture("citc-issue11_sinfo-list-reasons.txt"))
    assert row == {"REASON": "Low RealMemory", "NODELIST": "compute[001-003]"}
    assert hostlist_expand(row["NODELIST"]) == ["compute001", "compute002", "compute003"]


def test_every_slurm_fixture_is_parsed():
    if not SLURM.is_dir():
        pytest.skip(f"real captures folder {SLURM} is absent")
    missing = FILES - PARSED
    assert FILES and not missing, f"Slurm fixtures without a parser test: {sorted(missing)}"


@pytest.mark.parametrize(
    ("state", "schedulable", "drained"),
    [
        ("idle", True, False),
        ("mixed", True, False),
        ("draining", False, False),
        ("drained", False, True),
        ("drained*", False, True),
        ("down*", False, True),
        ("allocated", True, False),
    ],
)
def test_sinfo_long_states(state, schedulable, drained):
    (node,) = sinfo_nodes_parse(f"gpu1|{state}|none\n")
    assert (node.is_schedulable, node.is_drained, node.reason) == (schedulable, drained, "")


def test_adapter_formats_squeue_and_sacct():
    jobs = squeue_parse(
        "42|RUNNING|alice|gpu|2026-12-01T10:00:00|gpu[1-2]|train|v2\n43|COMPLETING|bob|gpu|N/A|gpu1|x\n"
    )
    assert [(j.job_id, j.state, j.nodes, j.name) for j in jobs] == [
        ("42", "RUNNING", ("gpu1", "gpu2"), "train|v2"),
        ("43", "COMPLETING", ("gpu1",), "x"),
    ]
    assert jobs[1].start_at is None
    (done,) = sacct_parse("7|CANCELLED by 0|alice|gpu|2026-12-01T10:00:00|2026-12-01T11:00:00|gpu1|eval\n")
    assert done.state == "CANCELLED" and done.end_at == dt.datetime(2026, 12, 1, 11)
    with pytest.raises(PermanentError):
        squeue_parse("garbage\n")
    with pytest.raises(PermanentError):
        hostlist_expand("gra[1-...")


def test_allocation_reads_configured_and_allocated_gpus_where_slurm_accounts_for_them():
    (gres_node,) = scontrol_allocation_parse(fixture("awsomeai-issue195_scontrol-show-node_idle-drain-gres.txt"))
    assert (gres_node.name, gres_node.total, gres_node.allocated) == ("yigou-dev-102-68", 1, 0)
    # slurm-exporter's nodes declare typed GPUs in Gres= but Slurm does not account for them in TRES: the total
    # comes from Gres=, the allocation is unknown (not zero).
    exporter = {
        a.name: a for a in scontrol_allocation_parse(fixture("slurmexporter_slurm-26.05.2_scontrol-show-nodes-o.txt"))
    }
    totals = sorted({a.total for a in exporter.values()})
    assert totals == [0, 4] and {a.allocated for a in exporter.values()} == {None}
    pcluster = scontrol_allocation_parse(fixture("pcluster_scontrol-show-nodes_down-reboot-issued.txt"))
    assert pcluster and all((a.total, a.allocated) == (0, None) for a in pcluster)


def test_allocation_of_a_busy_node_in_the_one_line_layout():
    line = (
        "NodeName=gn7 Arch=x86_64 CoresPerSocket=32 CPUAlloc=48 Gres=gpu:h100:8(S:0-1) NodeAddr=gn7 State=MIXED "
        "CfgTRES=cpu=128,mem=2000G,billing=128,gres/gpu=8 AllocTRES=cpu=48,mem=600G,gres/gpu=5,gres/gpu:h100=5\n"
        "NodeName=gn8 Gres=gpu:h100:4(S:0),gpu:h100:4(S:1) State=IDLE CfgTRES=cpu=128,gres/gpu=8 AllocTRES=\n"
    )
    found = {a.name: (a.total, a.allocated) for a in scontrol_allocation_parse(line)}
    assert found == {"gn7": (8, 5), "gn8": (8, 0)}


def test_allocation_from_sinfo_gres_used():
    text = (
        "gn1|gpu:8|gpu:0|\n"
        "gn2|gpu:h100:8(S:0-1)|gpu:h100:3(IDX:0-2)|\n"
        "gn2|gpu:h100:8(S:0-1)|gpu:h100:3(IDX:0-2)|\n"  # the same node in a second partition
        "gn3|gpu:a:4,gpu:b:4|gpu:a:1(IDX:0),gpu:b:2(IDX:5-6)|\n"
        "cpu1|(null)|(null)|\n"
    )
    found = {a.name: (a.total, a.allocated) for a in sinfo_allocation_parse(text)}
    assert found == {"gn1": (8, 0), "gn2": (8, 3), "gn3": (8, 3), "cpu1": (0, 0)}
    with pytest.raises(PermanentError, match="unexpected sinfo line"):
        sinfo_allocation_parse("garbage without separators")
