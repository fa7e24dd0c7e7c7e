"""McpInstance, ApiKey, Binding and CallLog move from mcp_app to tools_app, the domain.

The tables stay as they are (db_table keeps their mcp_app names): only Django's idea of which app owns
them changes (state operations), together with their content types, so that permissions (and the group
`toolhub users` that holds them) follow the models. mcp_app 0007 removes them from mcp_app's state.
"""

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import tools_app.validators
from django.conf import settings
from django.db import migrations, models

MOVED = ("mcpinstance", "apikey", "binding", "calllog")


def _relabel(apps, old: str, new: str) -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label=old, model__in=MOVED).update(app_label=new)


def move_content_types(apps, schema_editor):
    _relabel(apps, "mcp_app", "tools_app")


def move_content_types_back(apps, schema_editor):
    _relabel(apps, "tools_app", "mcp_app")


class Migration(migrations.Migration):

    dependencies = [
        ('tools_app', '0004_replace_stored_lone_surrogates'),
        ('mcp_app', '0006_mcp_instance_verbose_name'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
        migrations.CreateModel(
            name='McpInstance',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('name', models.CharField(max_length=200)),
                ('slug', models.SlugField(help_text="URL segment of the endpoint /mcp/{slug}/: letters, digits, '-' and '_'.", max_length=100, unique=True)),
                ('description', models.TextField(blank=True)),
                ('instructions', models.TextField(blank=True, help_text='Sent to MCP clients in the initialize result.')),
                ('enabled', models.BooleanField(default=True)),
                ('discovery', models.CharField(choices=[('list_all', 'List all tools'), ('search', 'Search (list only registry tools)')], default='list_all', max_length=16)),
                ('allow_registration', models.BooleanField(default=False)),
                ('max_result_bytes', models.PositiveIntegerField(default=200000, validators=[django.core.validators.MinValueValidator(1000), django.core.validators.MaxValueValidator(2147483647)])),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'MCP instance',
                'db_table': 'mcp_app_mcpinstance',
                'ordering': ['name', 'id'],
            },
        ),
        migrations.CreateModel(
            name='ApiKey',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('label', models.CharField(blank=True, max_length=200)),
                ('prefix', models.CharField(editable=False, max_length=16)),
                ('key_hash', models.CharField(editable=False, max_length=64, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('last_used_at', models.DateTimeField(blank=True, editable=False, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('mcp_instance', models.ForeignKey(error_messages={'invalid': '%(model)s with %(field)s %(value)r does not exist.'}, on_delete=django.db.models.deletion.CASCADE, related_name='api_keys', to='tools_app.mcpinstance', verbose_name='MCP instance')),
            ],
            options={
                'verbose_name': 'API key',
                'db_table': 'mcp_app_apikey',
                'ordering': ['-created_at', 'id'],
            },
        ),
        migrations.CreateModel(
            name='CallLog',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('tool_name', models.CharField(max_length=64)),
                ('source', models.CharField(default='mcp', max_length=16)),
                ('status', models.CharField(choices=[('ok', 'OK'), ('error', 'Error')], max_length=8)),
                ('error_code', models.CharField(blank=True, max_length=40)),
                ('error_message', models.TextField(blank=True)),
                ('duration_ms', models.FloatField()),
                ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False)),
                ('api_key', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='call_logs', to='tools_app.apikey')),
                ('owner', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('tool', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='call_logs', to='tools_app.tool')),
                ('mcp_instance', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='call_logs', to='tools_app.mcpinstance', verbose_name='MCP instance')),
            ],
            options={
                'db_table': 'mcp_app_calllog',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['owner', '-created_at'], name='mcp_app_cal_owner_i_96717f_idx'), models.Index(fields=['tool', '-created_at'], name='mcp_app_cal_tool_id_4c7d90_idx')],
            },
        ),
        migrations.CreateModel(
            name='Binding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('enabled', models.BooleanField(default=True)),
                ('name_override', models.CharField(blank=True, max_length=64, validators=[tools_app.validators.validate_tool_name])),
                ('description_override', models.TextField(blank=True, max_length=1024)),
                ('name_key', models.CharField(editable=False, max_length=64)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('tool', models.ForeignKey(error_messages={'invalid': '%(model)s with %(field)s %(value)r does not exist.'}, on_delete=django.db.models.deletion.CASCADE, related_name='bindings', to='tools_app.tool')),
                ('mcp_instance', models.ForeignKey(error_messages={'invalid': '%(model)s with %(field)s %(value)r does not exist.'}, on_delete=django.db.models.deletion.CASCADE, related_name='bindings', to='tools_app.mcpinstance', verbose_name='MCP instance')),
            ],
            options={
                'db_table': 'mcp_app_binding',
                'ordering': ['mcp_instance_id', 'name_key', 'id'],
                'constraints': [models.UniqueConstraint(fields=('mcp_instance', 'tool'), name='binding_unique_tool_per_instance'), models.UniqueConstraint(fields=('mcp_instance', 'name_key'), name='binding_unique_name_per_instance')],
            },
        ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back),
    ]
