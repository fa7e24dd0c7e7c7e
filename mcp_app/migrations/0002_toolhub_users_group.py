"""SPEC §8: the group `toolhub users` holds every toolhub model permission."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

GROUP = "toolhub users"
APPS = ("tools_app", "mcp_app")


def create_group(apps, schema_editor):
    # Permissions are normally created after migrate; create them now so the group can hold them.
    for app_label in APPS:
        app_config = apps.get_app_config(app_label)
        app_config.models_module = True  # the migration state's AppConfigStub lacks it
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name=GROUP)
    group.permissions.set(Permission.objects.filter(content_type__app_label__in=APPS))


def remove_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_app", "0001_initial"),
        ("tools_app", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_group, remove_group)]
