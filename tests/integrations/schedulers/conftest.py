"""A real Slurm cluster for the scheduler contract test: munged, slurmctld and two slurmd (fake GPU nodes
gn1, gn2 with 8 GPUs each) running as children of the test on 127.0.0.1, configured in a temp dir."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

DAEMONS = {"munged": "/usr/sbin/munged", "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd"}
CLIENTS = ("scontrol", "sinfo", "squeue", "sbatch", "scancel")
NODES = ("gn1", "gn2")


@dataclass(frozen=True)
class SlurmCluster:
    conf: Path
    env: dict[str, str]

    def run(self, *argv: str) -> str:
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30, check=True)
        return done.stdout


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait(what: str, check, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.3)
    raise TimeoutError(f"Slurm test cluster: {what} not ready after {timeout_s:.0f} s")


def _slurm_conf(tmp: Path, ports: list[int]) -> str:
    ctld, slurmd, *node_ports = ports
    lines = [
        "ClusterName=gpuopstest",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld}",
        f"SlurmdPort={slurmd}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={tmp / 'munge.sock'}",
        "CredType=cred/munge",
        f"StateSaveLocation={tmp / 'state'}",
        f"SlurmdSpoolDir={tmp / 'spool'}/%n",
        f"SlurmctldPidFile={tmp / 'slurmctld.pid'}",
        f"SlurmdPidFile={tmp}/slurmd-%n.pid",
        f"SlurmctldLogFile={tmp / 'slurmctld.log'}",
        f"SlurmdLogFile={tmp}/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "JobAcctGatherType=jobacct_gather/none",
        # No slurmdbd here: sacct cannot answer (the sacct parser is tested on real captures instead).
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "GresTypes=gpu",
    ]
    for name, port in zip(NODES, node_ports, strict=True):
        lines.append(
            f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs=2 RealMemory=500 "
            "Gres=gpu:8 State=UNKNOWN"
        )
    lines.append(f"PartitionName=gpu Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    missing = [p for p in DAEMONS.values() if not os.access(p, os.X_OK)] + [
        c for c in CLIENTS if shutil.which(c) is None
    ]
    if missing:
        pytest.skip(f"Slurm not installed (missing {', '.join(missing)}); .ci/run installs slurmctld slurmd munge")
    if os.geteuid() != 0:
        pytest.skip("the Slurm test cluster runs its daemons as root (SlurmUser=root)")
    tmp = tmp_path_factory.mktemp("slurm")
    (tmp / "state").mkdir()
    for name in NODES:
        (tmp / "spool" / name).mkdir(parents=True)
    # slurmd accepts a GPU only with a device file; character devices like /dev/null's stand in for them.
    null = os.stat("/dev/null").st_rdev
    (tmp / "dev").mkdir()
    for i in range(8):
        os.mknod(tmp / "dev" / f"gpu{i}", 0o600 | stat.S_IFCHR, null)
    key = tmp / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = tmp / "slurm.conf"
    conf.write_text(_slurm_conf(tmp, _free_ports(2 + len(NODES))))
    (tmp / "gres.conf").write_text(f"AutoDetect=off\nNodeName={','.join(NODES)} Name=gpu File={tmp}/dev/gpu[0-7]\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs: list[subprocess.Popen] = []

    def start(*argv: str) -> None:
        log = (tmp / f"{Path(argv[0]).name}-{len(procs)}.out").open("w")
        procs.append(subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    cluster = SlurmCluster(conf=conf, env=env)
    try:
        start(DAEMONS["munged"], "-F", "-f", f"--socket={tmp / 'munge.sock'}", f"--key-file={key}",
              f"--pid-file={tmp / 'munged.pid'}", f"--seed-file={tmp / 'munge.seed'}",
              f"--log-file={tmp / 'munged.log'}")  # fmt: skip
        _wait("munged", lambda: (tmp / "munge.sock").exists())
        start(DAEMONS["slurmctld"], "-D", "-i")
        _wait("slurmctld", lambda: subprocess.run(["scontrol", "ping"], env=env, capture_output=True).returncode == 0)
        for name in NODES:
            start(DAEMONS["slurmd"], "-D", "-N", name)

        def nodes_idle() -> bool:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=env, capture_output=True, text=True)
            return out.stdout.split().count("idle") == len(NODES)

        _wait("slurmd nodes idle", nodes_idle)
        yield cluster
    finally:
        # Jobs run under slurmstepd, which outlives slurmd: end them while the controller is still up.
        if procs and procs[-1].poll() is None:
            subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True, timeout=30)
            with contextlib.suppress(TimeoutError):  # stop the daemons anyway
                _wait("jobs ended", lambda: not subprocess.run(
                    ["squeue", "-h"], env=env, capture_output=True, text=True, timeout=30
                ).stdout.strip(), timeout_s=20)  # fmt: skip
        for proc in reversed(procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
