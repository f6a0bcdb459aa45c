"""Indexes for the console's search on PostgreSQL (console/search.py).

Django's case-insensitive lookups compare UPPER(column): iexact as `UPPER(col) = UPPER(%s)`, istartswith and
icontains as `UPPER(col) LIKE UPPER(%s)`. Each searched identifier gets
- a btree on UPPER(col) with text_pattern_ops: exact matches and prefixes (LIKE 'ABC%'), whatever the collation;
- a pg_trgm trigram GIN on UPPER(col): substrings (LIKE '%ABC%') of 3 characters or more.
Without them every search read every node, card, NIC and port.

The indexes live only in the database, not in the models' state: SQLite has neither operator classes nor GIN,
and its search tables are small, so there the migration does nothing (TrigramExtension is a no-op off
PostgreSQL too).
"""

from typing import Any

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.contrib.postgres.operations import TrigramExtension
from django.db import migrations, models
from django.db.models.functions import Upper

# (model, column, kinds): "eq" a btree for exact and prefix matches, "trgm" a trigram GIN for substrings.
SEARCHED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("node", "hostname", ("eq", "trgm")),
    ("node", "serial", ("eq", "trgm")),
    ("node", "asset_tag", ("eq", "trgm")),
    ("node", "po_number", ("eq",)),
    ("accelerator", "serial", ("eq", "trgm")),
    ("accelerator", "uuid", ("eq", "trgm")),
    ("accelerator", "po_number", ("eq",)),
    ("nic", "serial", ("eq", "trgm")),
    ("nic", "node_guid", ("eq", "trgm")),
    ("nicport", "guid", ("trgm",)),
    ("switch", "name", ("eq", "trgm")),
    ("switch", "serial", ("eq", "trgm")),
)


def _index(model: str, column: str, kind: str) -> models.Index:
    name = f"cmdb_{model}_{column}_{'up' if kind == 'eq' else 'tg'}"[:30]
    if kind == "eq":
        return models.Index(OpClass(Upper(column), name="text_pattern_ops"), name=name)
    return GinIndex(OpClass(Upper(column), name="gin_trgm_ops"), name=name)


class AddIndexOnPostgreSQL(migrations.operations.base.Operation):
    """AddIndex on PostgreSQL only, outside the models' state (see the module docstring)."""

    reversible = True

    def __init__(self, model_name: str, column: str, kind: str) -> None:
        self.model_name, self.column, self.kind = model_name, column, kind

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return self.__class__.__qualname__, [self.model_name, self.column, self.kind], {}

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            model = to_state.apps.get_model(app_label, self.model_name)
            schema_editor.add_index(model, _index(self.model_name, self.column, self.kind))

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor == "postgresql":
            model = from_state.apps.get_model(app_label, self.model_name)
            schema_editor.remove_index(model, _index(self.model_name, self.column, self.kind))

    def describe(self) -> str:
        return f"Search index ({self.kind}) on UPPER({self.model_name}.{self.column}), PostgreSQL only"


class Migration(migrations.Migration):
    dependencies = [
        ("cmdb", "0006_node_topology"),
    ]

    operations = [
        TrigramExtension(),
        *(AddIndexOnPostgreSQL(model, column, kind) for model, column, kinds in SEARCHED for kind in kinds),
    ]
