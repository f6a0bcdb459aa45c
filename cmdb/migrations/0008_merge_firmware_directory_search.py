"""Joins the three 0007 branches (firmware compliance, directory group mappings, search indexes)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("cmdb", "0007_directory_group_mapping"),
        ("cmdb", "0007_firmware_compliance"),
        ("cmdb", "0007_search_indexes"),
    ]

    operations = []
