"""Where things are: Site -> Room -> Rack, and the U positions devices occupy."""

from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from .base import TrackedModel


class Site(TrackedModel):
    """A datacenter site. Grants on a site cover everything in it (rooms, racks, nodes, cards, switches)."""

    code = models.SlugField(max_length=32, unique=True, help_text="Short stable code, e.g. 'sh1'.")
    name = models.CharField(max_length=200)
    region = models.CharField(max_length=100, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    # The cost model: a card draws its model's TDP times the site's PUE, at this price per kWh.
    power_price_kwh = models.DecimalField(
        max_digits=8, decimal_places=4, default=0, help_text="Electricity price per kWh (the fleet's currency)."
    )
    pue = models.DecimalField(
        max_digits=4, decimal_places=2, default=1, help_text="Power usage effectiveness (facility / IT power)."
    )

    class Meta:
        ordering = ["code"]
        permissions = [
            ("view_scope", "Can view inventory in this site"),
            ("change_scope", "Can change inventory in this site"),
        ]

    def __str__(self) -> str:
        return self.code


class Room(TrackedModel):
    """A data hall / room within a site."""

    # PROTECT: deleting a site must never cascade into its inventory.
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="rooms")
    name = models.CharField(max_length=100)

    class Meta:
        ordering = ["site__code", "name"]
        constraints = [models.UniqueConstraint(fields=["site", "name"], name="room_unique_name_per_site")]

    def __str__(self) -> str:
        return f"{self.site.code}/{self.name}"


class RackCooling(models.TextChoices):
    AIR = "air", "Air"
    LIQUID = "liquid", "Liquid (DLC)"


class RackStatus(models.TextChoices):
    PLANNED = "planned", "Planned"
    ACTIVE = "active", "Active"
    RESERVED = "reserved", "Reserved"
    DECOMMISSIONED = "decommissioned", "Decommissioned"


class RackFace(models.TextChoices):
    FRONT = "front", "Front"
    REAR = "rear", "Rear"


class Rack(TrackedModel):
    """A rack. Devices occupy U positions on one face; the occupancy table holds the no-overlap rule."""

    room = models.ForeignKey(Room, on_delete=models.PROTECT, related_name="racks")
    name = models.CharField(max_length=100)
    row = models.CharField(max_length=32, blank=True)
    u_height = models.PositiveSmallIntegerField(default=42, validators=[MinValueValidator(1)])
    power_budget_kw = models.DecimalField(max_digits=7, decimal_places=2, default=0)
    cooling = models.CharField(max_length=16, choices=RackCooling.choices, default=RackCooling.AIR)
    status = models.CharField(max_length=16, choices=RackStatus.choices, default=RackStatus.ACTIVE)

    class Meta:
        ordering = ["room__site__code", "room__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["room", "name"], name="rack_unique_name_per_room"),
            models.CheckConstraint(condition=models.Q(u_height__gte=1), name="rack_u_height_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.room}/{self.name}"

    @property
    def site(self) -> Site:
        return self.room.site


class RackUnit(models.Model):
    """One occupied U on one face of a rack. Unique per (rack, face, unit): the database refuses overlaps.

    Rows are written by cmdb.services.racks.rack_occupancy_set, never by hand.
    """

    rack = models.ForeignKey(Rack, on_delete=models.CASCADE, related_name="units")
    face = models.CharField(max_length=8, choices=RackFace.choices)
    unit = models.PositiveSmallIntegerField()
    node = models.ForeignKey("cmdb.Node", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    switch = models.ForeignKey("cmdb.Switch", null=True, blank=True, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rack", "face", "unit"], name="rackunit_no_overlap"),
            models.CheckConstraint(
                condition=(
                    models.Q(node__isnull=False, switch__isnull=True)
                    | models.Q(node__isnull=True, switch__isnull=False)
                ),
                name="rackunit_one_occupant",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rack} U{self.unit} {self.face}"
