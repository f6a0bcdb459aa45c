"""Trigram indexes for the API's `?q=` on the columns the console's search does not cover (PostgreSQL only).

`?q=` ORs a substring match over an endpoint's search fields; PostgreSQL serves the OR from indexes (a BitmapOr)
only when every branch has one, so one unindexed column turns the search into a scan of the table.
"""

from importlib import import_module

from django.db import migrations

# A module name that starts with a digit cannot be imported with an import statement.
AddIndexOnPostgreSQL = import_module("cmdb.migrations.0007_search_indexes").AddIndexOnPostgreSQL


class Migration(migrations.Migration):
    dependencies = [
        ("cmdb", "0011_node_allocation"),
    ]

    operations = [
        AddIndexOnPostgreSQL("accelerator", "pci_bus_id", "trgm"),
        AddIndexOnPostgreSQL("node", "po_number", "trgm"),
    ]
