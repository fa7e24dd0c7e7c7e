"""A release's migrations run while workers of the previous release keep serving (docs/deploy.md, section 5).

Those workers insert rows without the columns the new release added, so every NOT NULL column added by a
migration after the rule was set must have a default in the database (`db_default`), not only in Python:
without one, each of the old workers' inserts fails until they are replaced (seen with CallLog.notes: every
call answered INTERNAL_ERROR while the migration was applied).
"""

from django.apps import apps
from django.db import models
from django.db.migrations import AddField
from django.db.migrations.loader import MigrationLoader

# The last migration of each app before the rule: columns added up to these were deployed with a stop.
BEFORE_THE_RULE = {
    "tools_app": "0016_binding_resource_uri_instance_log_level",
    "oauth_app": "0002_clientdocument_authorizedclient",
}


def _added_columns() -> list[tuple[str, str, str, str]]:
    """(app, migration, model, field) for every AddField after the rule, in the project's apps."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    added = []
    for (app, name), migration in loader.disk_migrations.items():
        if app not in BEFORE_THE_RULE or name <= BEFORE_THE_RULE[app]:
            continue
        for operation in migration.operations:
            if isinstance(operation, AddField):
                added.append((app, name, operation.model_name, operation.name))
    return sorted(added)


def test_every_not_null_column_added_since_the_rule_has_a_database_default():
    missing = []
    for app, migration, model_name, field_name in _added_columns():
        field = apps.get_model(app, model_name)._meta.get_field(field_name)
        if field.null or field.db_default is not models.NOT_PROVIDED:
            continue
        missing.append(f"{app}.{model_name}.{field_name} (added by {migration})")
    assert missing == []


def test_the_check_sees_the_columns_of_the_release():
    """The walk finds the columns this rule is about, so the check above cannot pass by finding none."""
    added = {(app, model, field) for app, _, model, field in _added_columns()}
    assert {
        ("tools_app", "calllog", "notes"),
        ("tools_app", "table", "storage"),
        ("tools_app", "binding", "pinned_arguments"),
        ("tools_app", "apikey", "read_only"),
        ("oauth_app", "client", "used_at"),
    } <= added
