"""One call record for every surface. CallLog.source becomes `surface` (with choices: mcp, api,
admin; the values stored so far are exactly these) and gains `user`, who called. Rows written before know
only the owner, who is the caller of every MCP call and of most others: `user` starts as the owner."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def caller_is_owner(apps, schema_editor):
    apps.get_model("tools_app", "CallLog").objects.update(user_id=F("owner_id"))


class Migration(migrations.Migration):
    dependencies = [
        ("tools_app", "0005_move_mcp_models"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RenameField(model_name="calllog", old_name="source", new_name="surface"),
        migrations.AlterField(
            model_name="calllog",
            name="surface",
            field=models.CharField(
                choices=[("mcp", "MCP"), ("api", "API"), ("admin", "Admin try-it")], default="mcp", max_length=16
            ),
        ),
        migrations.AddField(
            model_name="calllog",
            name="user",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
                verbose_name="caller",
            ),
        ),
        migrations.RunPython(caller_is_owner, migrations.RunPython.noop),
    ]
