"""What discovery observed, kept apart from the CMDB's planned truth.

These are operational records, not inventory: they are plain models (not TrackedModel) because every poll
rewrites them and a change record per LLDP refresh would drown the history. What discovery changes in the
CMDB itself (SwitchPort speed, state, MAC) goes through TrackedModel change records.
"""

from __future__ import annotations

from django.db import models

from cmdb.models import NicPort, Node, Switch, SwitchPort


class PollStatus(models.TextChoices):
    RUNNING = "running", "Running"
    OK = "ok", "OK"
    FAILED = "failed", "Failed"


class PollRun(models.Model):
    """One discovery poll of one switch (SNMP) or one fabric sweep (ibnetdiscover).

    Created before the work starts (status running) so a stuck or crashed poll is visible; `task_id` is the
    Celery task id when a worker ran it.
    """

    switch = models.ForeignKey(Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="poll_runs")
    kind = models.CharField(max_length=16, default="snmp")  # snmp, cli, ibnetdiscover
    status = models.CharField(max_length=16, choices=PollStatus.choices, default=PollStatus.RUNNING, db_index=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    ports_seen = models.PositiveIntegerField(default=0)
    ports_created = models.PositiveIntegerField(default=0)
    ports_updated = models.PositiveIntegerField(default=0)
    neighbors_seen = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["switch", "-started_at"])]

    def __str__(self) -> str:
        return f"{self.kind} poll of {self.switch or 'fabric'} {self.status}"


class ObservationSource(models.TextChoices):
    LLDP = "lldp", "LLDP"
    IBNETDISCOVER = "ibnetdiscover", "ibnetdiscover"
    HOST_LLDP = "host_lldp", "Host LLDP"


class ObservedLink(models.Model):
    """A cable as one of its ends sees it: the observer's port -> the neighbour's identity.

    Switch views (LLDP by SNMP or CLI, ibnetdiscover): `switch`/`local_*` are the switch port, remote_chassis_id
    the neighbour's chassis id (a MAC, formatted aa:bb:..) and remote_port its port id. For InfiniBand, ports
    are port numbers and remote_port_guid / the LIDs are filled; `nic_port` is the HCA port whose GUID it is. A
    poll replaces the rows of its switch (or fabric sweep).

    Host view (`host_lldp`, from the node agent's lldpctl): `node`/`nic_port` and `local_*` are the host
    interface, `remote_*` the switch as it announces itself, and `switch`/`switch_port` what that resolves to in
    the CMDB (empty when it resolves to nothing: an unknown neighbour). Each applied agent report replaces its
    node's rows.
    """

    source = models.CharField(max_length=16, choices=ObservationSource.choices, default=ObservationSource.LLDP)
    switch = models.ForeignKey(Switch, null=True, blank=True, on_delete=models.CASCADE, related_name="observed_links")
    switch_port = models.ForeignKey(
        SwitchPort, null=True, blank=True, on_delete=models.SET_NULL, related_name="observed_links"
    )
    local_device = models.CharField(max_length=253, help_text="Switch name, or node GUID for InfiniBand.")
    local_port = models.CharField(max_length=64)
    remote_chassis_id = models.CharField(max_length=64, blank=True, db_index=True)
    remote_port = models.CharField(max_length=128, blank=True)
    remote_system = models.CharField(max_length=253, blank=True)
    remote_port_description = models.CharField(max_length=253, blank=True)
    remote_port_guid = models.CharField(max_length=32, blank=True, db_index=True)
    local_lid = models.PositiveIntegerField(null=True, blank=True)
    remote_lid = models.PositiveIntegerField(null=True, blank=True)
    poll_run = models.ForeignKey(PollRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="links")
    node = models.ForeignKey(
        Node,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="observed_links",
        help_text="Host end: the observing node (host LLDP) or the node of nic_port.",
    )
    nic_port = models.ForeignKey(
        NicPort,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="observed_links",
        help_text="Host end, resolved in the CMDB.",
    )
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["local_device", "local_port", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "local_device", "local_port", "remote_chassis_id", "remote_port"],
                name="observedlink_unique_observation",
            )
        ]
        indexes = [models.Index(fields=["switch", "source"]), models.Index(fields=["node", "source"])]

    def __str__(self) -> str:
        remote = self.remote_system or self.remote_chassis_id
        return f"{self.local_device}:{self.local_port} -> {remote}:{self.remote_port}"
