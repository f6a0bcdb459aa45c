"""Maintenance windows and change freezes per site or cluster (data, edited in the admin with history).

A change ticket starts work only inside a window of every site and cluster it touches, and never during a
freeze (cmdb.services.windows decides; the workflow engine asks it where a change ticket starts work).
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from .base import TrackedModel
from .locations import Site
from .org import Cluster


class WindowKind(models.TextChoices):
    WEEKLY = "weekly", "Weekly window"
    ONE_OFF = "one_off", "One-off window"
    FREEZE = "freeze", "Change freeze"


WEEKDAYS = (
    (0, "Monday"),
    (1, "Tuesday"),
    (2, "Wednesday"),
    (3, "Thursday"),
    (4, "Friday"),
    (5, "Saturday"),
    (6, "Sunday"),
)


class MaintenanceWindow(TrackedModel):
    """When changes may run (weekly or one-off windows) or must not (freezes), for a site or one cluster of it.

    Weekly: `weekday` + `start_time`-`end_time` in `timezone` (empty: the site's); an end at or before the start
    runs past midnight into the next day. One-off windows and freezes: `starts_at`-`ends_at` (absolute times).
    `cluster` empty: the whole site. A site or cluster with no active window at all is not restricted.
    """

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="maintenance_windows")
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="maintenance_windows",
        help_text="Empty: every node of the site.",
    )
    kind = models.CharField(max_length=16, choices=WindowKind.choices, default=WindowKind.WEEKLY)
    name = models.CharField(max_length=200, blank=True, help_text="e.g. 'Tuesday night', 'Year-end freeze'.")
    weekday = models.PositiveSmallIntegerField(null=True, blank=True, choices=WEEKDAYS)
    start_time = models.TimeField(null=True, blank=True)
    end_time = models.TimeField(null=True, blank=True)
    timezone = models.CharField(
        max_length=64, blank=True, help_text="IANA name, e.g. Asia/Shanghai; empty: the site's."
    )
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["site_id", "cluster_id", "kind", "weekday", "start_time", "starts_at"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(kind="weekly")
                | Q(weekday__isnull=False, start_time__isnull=False, end_time__isnull=False),
                name="maintenancewindow_weekly_has_times",
            ),
            models.CheckConstraint(
                condition=Q(kind="weekly") | Q(starts_at__isnull=False, ends_at__isnull=False),
                name="maintenancewindow_period_has_bounds",
            ),
            models.CheckConstraint(
                condition=Q(starts_at__isnull=True) | Q(ends_at__isnull=True) | Q(ends_at__gt=models.F("starts_at")),
                name="maintenancewindow_ends_after_start",
            ),
        ]
        indexes = [models.Index(fields=["site", "is_active"])]

    def __str__(self) -> str:
        where = self.cluster.name if self.cluster_id else self.site.code
        return f"{where}: {self.describe()}"

    def zone(self) -> zoneinfo.ZoneInfo:
        name = self.timezone or (self.site.timezone if self.site_id else "") or "UTC"
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return zoneinfo.ZoneInfo("UTC")

    def describe(self) -> str:
        """'Tue 02:00-06:00 Asia/Shanghai', or the period of a one-off window or freeze."""
        if self.kind == WindowKind.WEEKLY and self.weekday is not None and self.start_time and self.end_time:
            day = dict(WEEKDAYS)[self.weekday][:3]
            return f"{day} {self.start_time:%H:%M}-{self.end_time:%H:%M} {self.zone().key}"
        label = "freeze" if self.kind == WindowKind.FREEZE else "window"
        if self.starts_at and self.ends_at:
            return f"{label} {self.starts_at:%Y-%m-%d %H:%M}-{self.ends_at:%Y-%m-%d %H:%M} UTC"
        return label

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.cluster_id and self.site_id and self.cluster.site_id != self.site_id:
            errors["cluster"] = "The cluster is at another site."
        if self.timezone:
            try:
                zoneinfo.ZoneInfo(self.timezone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                errors["timezone"] = f"Unknown time zone {self.timezone!r}."
        if self.kind == WindowKind.WEEKLY:
            for name in ("weekday", "start_time", "end_time"):
                if getattr(self, name) is None:
                    errors[name] = "A weekly window needs a weekday, a start and an end time."
            if self.start_time is not None and self.start_time == self.end_time:
                errors["end_time"] = "The window has no length."
        else:
            if self.starts_at is None:
                errors["starts_at"] = "Required for a one-off window or a freeze."
            if self.ends_at is None:
                errors["ends_at"] = "Required for a one-off window or a freeze."
            if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
                errors["ends_at"] = "Must be after the start."
        if errors:
            raise ValidationError(errors)

    def occurrences(self, start: dt.datetime, end: dt.datetime) -> list[tuple[dt.datetime, dt.datetime]]:
        """The (start, end) periods of this window that overlap [start, end), as aware datetimes."""
        if self.kind != WindowKind.WEEKLY:
            if self.starts_at and self.ends_at and self.starts_at < end and self.ends_at > start:
                return [(self.starts_at, self.ends_at)]
            return []
        if self.weekday is None or self.start_time is None or self.end_time is None:
            return []
        tz = self.zone()
        found = []
        day = start.astimezone(tz).date() - dt.timedelta(days=7)  # a window started last week may still run
        while True:
            opens = dt.datetime.combine(day, self.start_time, tzinfo=tz)
            if opens >= end:
                break
            if day.weekday() == self.weekday:
                close_day = day if self.end_time > self.start_time else day + dt.timedelta(days=1)
                closes = dt.datetime.combine(close_day, self.end_time, tzinfo=tz)
                if closes > start:
                    found.append((opens, closes))
            day += dt.timedelta(days=1)
        return found
