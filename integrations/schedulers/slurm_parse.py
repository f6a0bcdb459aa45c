"""Parsers of Slurm's command output: `scontrol show node|job` (one-line or multi-line), `sinfo`, `squeue`,
`sacct`. Pure functions over text, tested on real captures (tests/integrations/schedulers).

The adapter asks for explicit formats ("|"-separated, no header) so that its own output is unambiguous; the
table parsers also read the default human formats that operators paste (sinfo, sinfo -R, sacct -l).
"""

from __future__ import annotations

import datetime as dt
import re

from integrations.exceptions import PermanentError

from .base import SchedulerAllocation, SchedulerJob, SchedulerNodeState

# A key starts a token: "NodeName=", "CPUs/Task=", "AllocNode:Sid=". Values may hold "=" (CfgTRES=cpu=8,mem=1M)
# but a key is always preceded by whitespace, so "mem=" inside a value is not one.
_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_:/]*)=")
# Slurm appends "[user@time]" to a reason it stores (scontrol show node); everything before it is the reason,
# which may contain anything, "key=value" included.
_REASON = re.compile(r"(?:(?<=\s)|^)Reason=(.*?) \[([^\]@\s]+)@([^\]\s]+)\]")

# Node state words (base state + "+"-joined flags in scontrol; lower-case, compact forms in sinfo %t/%T).
_DRAIN_WORDS = {"DRAIN", "DRAINED", "DRAINING", "DRNG", "DRAIN*"}
# NOT_RESPONDING ("*") alone is not down: Slurm 22.05 shows a just-resumed node as IDLE* until its next ping,
# and turns a node that stays silent DOWN after SlurmdTimeout.
_DOWN_WORDS = {"DOWN", "FAIL", "FAILING", "FUTURE", "FUTR", "INVAL"}
_BUSY_WORDS = {"ALLOCATED", "ALLOC", "MIXED", "MIX", "COMPLETING", "COMP", "DRAINING", "DRNG", "FAILING"}


def scontrol_records_parse(text: str, *, first_key: str = "NodeName") -> list[dict[str, str]]:
    """Records of `scontrol show node|job` in either layout (`-o` one line per record, or the indented
    multi-line one with a blank line between records) as key -> value strings."""
    starts = [m.start(1) for m in _KEY.finditer(text) if m.group(1) == first_key]
    records = []
    for i, start in enumerate(starts):
        chunk = text[start : starts[i + 1] if i + 1 < len(starts) else len(text)]
        records.append(_record_parse(" ".join(chunk.split())))
    return records


def _record_parse(line: str) -> dict[str, str]:
    record: dict[str, str] = {}
    reason = _REASON.search(line)
    if reason is not None:
        record["Reason"] = reason.group(1).strip()
        record["ReasonUser"], record["ReasonTime"] = reason.group(2), reason.group(3)
        line = line[: reason.start()] + line[reason.end() :]
    keys = list(_KEY.finditer(line))
    for i, match in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        record.setdefault(match.group(1), line[match.end() : end].strip())
    return record


def state_words(state: str) -> set[str]:
    """ "IDLE+DRAIN" -> {"IDLE", "DRAIN"}; "drain*" -> {"DRAIN", "NOT_RESPONDING"}; "drng" -> {"DRAINING"}."""
    words = set()
    for word in state.upper().split("+"):
        if word.endswith("*"):
            words.add("NOT_RESPONDING")
        word = word.rstrip("*~#!%$@^-")
        words.add({"DRNG": "DRAINING", "DRAIN": "DRAIN"}.get(word, word))
    return words - {""}


def node_state_from(name: str, state: str, reason: str = "", jobs: tuple[str, ...] | None = None) -> SchedulerNodeState:
    """Our reading of a Slurm node state. Drained = DRAIN (or down) and nothing busy: Slurm shows
    IDLE+DRAIN / "drained" once the last job ended, MIXED+DRAIN / ALLOCATED+DRAIN / "draining" before."""
    words = state_words(state)
    draining = bool(words & _DRAIN_WORDS)
    down = bool(words & _DOWN_WORDS)
    busy = bool(words & _BUSY_WORDS) or bool(jobs)
    return SchedulerNodeState(
        name=name,
        state=state,
        is_schedulable=not (draining or down),
        is_drained=(draining or down) and not busy,
        running=len(jobs) if jobs is not None else None,
        reason=reason if reason not in ("none", "None", "(null)") else "",
        jobs=tuple(jobs or ()),
    )


def scontrol_nodes_parse(text: str) -> list[SchedulerNodeState]:
    """`scontrol show node [-o]` -> one state per node."""
    states = []
    for record in scontrol_records_parse(text):
        if "State" not in record:
            raise PermanentError(f"no State= for node {record.get('NodeName', '?')} in scontrol output")
        states.append(node_state_from(record["NodeName"], record["State"], record.get("Reason", "")))
    return states


# One GPU entry of Gres= ("gpu:8", "gpu:a100:4", "gpu:model_a:2(S:0-1)"): the count is the last field.
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")


def _tres_gpus(tres: str) -> int | None:
    """ "cpu=8,mem=1M,gres/gpu=4" -> 4; None without an untyped gres/gpu entry (typed ones repeat it)."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "gres/gpu" and value.isdigit():
            return int(value)
    return None


def scontrol_allocation_parse(text: str) -> list[SchedulerAllocation]:
    """`scontrol show node [-o]` (as operators paste it) -> GPUs configured (CfgTRES gres/gpu, else the counts in
    Gres=) and allocated (AllocTRES gres/gpu) per node. Slurm lists gres/gpu in AllocTRES only when its TRES
    accounting tracks it (it is in CfgTRES); otherwise the allocation is unknown here, not zero - the adapter reads
    sinfo's GresUsed instead, which slurmctld always knows."""
    allocations = []
    for record in scontrol_records_parse(text):
        configured = _tres_gpus(record.get("CfgTRES", ""))
        total = configured if configured is not None else _gres_gpus(record.get("Gres", ""))
        allocated = (_tres_gpus(record.get("AllocTRES", "")) or 0) if configured is not None else None
        allocations.append(SchedulerAllocation(name=record["NodeName"], total=total, allocated=allocated))
    return allocations


# The adapter's allocation read: `sinfo -h -N -O` with these fields, each ended by "|" (no padding, no truncation).
SINFO_GRES_FIELDS = "NodeList:|,Gres:|,GresUsed:|"


def _gres_gpus(gres: str) -> int:
    """GPUs in a Gres / GresUsed string: "gpu:8", "gpu:h100:3(IDX:0-2)", "gpu:a:1(IDX:0),gpu:b:2(IDX:1-2)"."""
    return sum(int(n) for n in _GRES_GPU.findall(re.sub(r"\([^)]*\)", "", gres)))


def sinfo_allocation_parse(text: str) -> list[SchedulerAllocation]:
    """`sinfo -h -N -O "NodeList:|,Gres:|,GresUsed:|"` -> GPUs configured and in use per node (a node in several
    partitions is listed once). GresUsed is what slurmctld has handed to jobs, whatever TRES accounting tracks."""
    found: dict[str, SchedulerAllocation] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 3:
            raise PermanentError(f"unexpected sinfo line: {line[:200]!r}")
        name, gres, used = (p.strip() for p in parts[:3])
        found.setdefault(name, SchedulerAllocation(name=name, total=_gres_gpus(gres), allocated=_gres_gpus(used)))
    return list(found.values())


def slurm_state_parse(name: str, text: str) -> SchedulerNodeState:
    """The state of node `name` in `scontrol show node <name> -o` output."""
    states = scontrol_nodes_parse(text)
    for state in states:
        if state.name == name:
            return state
    if len(states) == 1:  # `scontrol show node <name>` answers for that node even when asked by an alias
        return node_state_from(name, states[0].state, states[0].reason)
    if "State=" in text and "NodeName=" not in text:  # a bare "State=... Reason=..." line
        record = _record_parse(" ".join(text.split()))
        return node_state_from(name, record["State"], record.get("Reason", ""))
    raise PermanentError(f"no State= in scontrol output for {name}: {text[:200]!r}")


# The adapter's sinfo format: node, long state, reason, then everything else is the reason.
SINFO_FORMAT = "%N|%T|%E"


def sinfo_nodes_parse(text: str) -> list[SchedulerNodeState]:
    """`sinfo -h -N -o "%N|%T|%E"` -> one state per node (a node in several partitions is listed once)."""
    states: dict[str, SchedulerNodeState] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 2)
        if len(parts) != 3:
            raise PermanentError(f"unexpected sinfo line: {line[:200]!r}")
        name, state, reason = (p.strip() for p in parts)
        states.setdefault(name, node_state_from(name, state, reason))
    return list(states.values())


def table_parse(text: str) -> list[dict[str, str]]:
    """A human Slurm table with a header line (sinfo, sinfo -R, squeue, sacct -l) -> rows by header name.

    With a "----" line under the header (sacct) the dashes give the columns; otherwise rows split on
    whitespace when they have as many fields as the header, else on the header's column starts (left-aligned
    free text such as sinfo -R's REASON)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header, body = lines[0], lines[1:]
    if body and set(body[0].strip()) <= {"-", " "}:
        spans = [(m.start(), m.end()) for m in re.finditer(r"-+", body[0])]
        names = [header[a:b].strip() for a, b in spans]
        return [{n: row[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)} for row in body[1:]]
    names = header.split()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    rows = []
    for row in body:
        fields = row.split()
        if len(fields) == len(names):
            rows.append(dict(zip(names, fields, strict=True)))
            continue
        bounds = [*starts[1:], None]
        rows.append({n: row[a:b].strip() for n, a, b in zip(names, starts, bounds, strict=True)})
    return rows


def hostlist_expand(hostlist: str) -> list[str]:
    """Slurm's compact host list -> names: "gra[8,99,211-213]" -> gra8, gra99, gra211, gra212, gra213;
    zero padding kept ("compute[001-003]"). Several lists may be joined by commas outside brackets."""
    if hostlist.count("[") != hostlist.count("]"):  # cut short, e.g. by a terminal ("gra[1-...")
        raise PermanentError(f"cannot expand Slurm host list {hostlist[:200]!r}")
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", hostlist):
        match = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if match is None:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise PermanentError(f"cannot expand Slurm host list {hostlist[:200]!r}")
            for number in range(int(low), int(high or low) + 1):
                names.extend(hostlist_expand(f"{prefix}{number:0{len(low)}d}{suffix}"))
    return names


# The adapter's squeue format: id, state, user, partition, start, nodes, then the job name (may hold "|").
SQUEUE_FORMAT = "%i|%T|%u|%P|%S|%N|%j"
# The adapter's sacct fields, in order; JobName last for the same reason.
SACCT_FIELDS = ("JobID", "State", "User", "Partition", "Start", "End", "NodeList", "JobName")


def _time(value: str) -> dt.datetime | None:
    # Slurm prints local time without zone ("2021-08-09T14:30:18"), "Unknown"/"None"/"N/A" when unset.
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        return None


def squeue_parse(text: str) -> list[SchedulerJob]:
    """`squeue -h -o "%i|%T|%u|%P|%S|%N|%j"` -> jobs."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 6)
        if len(parts) != 7:
            raise PermanentError(f"unexpected squeue line: {line[:200]!r}")
        job_id, state, user, partition, start, nodes, name = parts
        jobs.append(
            SchedulerJob(
                job_id=job_id, state=state, user=user, partition=partition, name=name,
                nodes=tuple(hostlist_expand(nodes)) if nodes else (), start_at=_time(start),
            )
        )  # fmt: skip
    return jobs


def sacct_parse(text: str) -> list[SchedulerJob]:
    """`sacct -P -n -X -o JobID,State,User,Partition,Start,End,NodeList,JobName` -> jobs (allocations only)."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", len(SACCT_FIELDS) - 1)
        if len(parts) != len(SACCT_FIELDS):
            raise PermanentError(f"unexpected sacct line: {line[:200]!r}")
        row = dict(zip(SACCT_FIELDS, parts, strict=True))
        jobs.append(_job_from_row(row))
    return jobs


def sacct_table_parse(text: str) -> list[SchedulerJob]:
    """The fixed-width `sacct` / `sacct -l` table. Steps ("123.batch", shown truncated as "123.ba+") are
    left out: the allocation line is the job."""
    return [_job_from_row(row) for row in table_parse(text) if "." not in row.get("JobID", "")]


def _job_from_row(row: dict[str, str]) -> SchedulerJob:
    nodes = row.get("NodeList", "")
    return SchedulerJob(
        job_id=row["JobID"],
        state=row.get("State", "").split(" ")[0],  # "CANCELLED by 0" -> CANCELLED
        user=row.get("User", ""),
        partition=row.get("Partition", ""),
        name=row.get("JobName", ""),
        nodes=tuple(hostlist_expand(nodes)) if nodes and nodes not in ("None assigned", "(null)") else (),
        start_at=_time(row.get("Start", "")),
        end_at=_time(row.get("End", "")),
    )


def scontrol_jobs_parse(text: str) -> list[SchedulerJob]:
    """`scontrol show job [-o]` -> jobs."""
    jobs = []
    for record in scontrol_records_parse(text, first_key="JobId"):
        nodes = record.get("NodeList", "")
        jobs.append(
            SchedulerJob(
                job_id=record["JobId"],
                state=record.get("JobState", ""),
                user=record.get("UserId", "").split("(")[0],
                partition=record.get("Partition", ""),
                name=record.get("JobName", ""),
                nodes=tuple(hostlist_expand(nodes)) if nodes and nodes != "(null)" else (),
                start_at=_time(record.get("StartTime", "")),
                end_at=_time(record.get("EndTime", "")),
            )
        )
    return jobs


__all__ = [
    "SACCT_FIELDS",
    "SINFO_FORMAT",
    "SQUEUE_FORMAT",
    "hostlist_expand",
    "node_state_from",
    "sacct_parse",
    "sacct_table_parse",
    "scontrol_jobs_parse",
    "scontrol_nodes_parse",
    "scontrol_records_parse",
    "sinfo_nodes_parse",
    "slurm_state_parse",
    "squeue_parse",
    "state_words",
    "table_parse",
]
