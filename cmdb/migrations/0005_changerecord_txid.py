# The writing transaction's id on every change record, for the change feed's safe cursor (cmdb/changefeed.py).

from django.db import migrations, models

import cmdb.models.history


class Migration(migrations.Migration):
    dependencies = [
        ("cmdb", "0004_healthevent_source"),
    ]

    operations = [
        # Existing rows are all committed: 0 (a constant default adds the column without rewriting the table),
        # then the database default that stamps each new row with its transaction.
        migrations.AddField(
            model_name="changerecord",
            name="txid",
            field=models.BigIntegerField(default=0, editable=False),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="changerecord",
            name="txid",
            field=models.BigIntegerField(db_default=cmdb.models.history.CurrentTransactionId(), editable=False),
        ),
        migrations.AddIndex(
            model_name="changerecord",
            index=models.Index(fields=["txid", "id"], name="changerecord_feed"),
        ),
    ]
