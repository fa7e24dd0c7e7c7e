"""The models move to tools_app (see tools_app 0005); their tables stay, so state only."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_app', '0006_mcp_instance_verbose_name'),
        ('tools_app', '0005_move_mcp_models'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
        migrations.RemoveField(
            model_name='calllog',
            name='api_key',
        ),
        migrations.RemoveField(
            model_name='binding',
            name='mcp_instance',
        ),
        migrations.RemoveField(
            model_name='binding',
            name='tool',
        ),
        migrations.RemoveField(
            model_name='calllog',
            name='mcp_instance',
        ),
        migrations.RemoveField(
            model_name='calllog',
            name='owner',
        ),
        migrations.RemoveField(
            model_name='calllog',
            name='tool',
        ),
        migrations.RemoveField(
            model_name='mcpinstance',
            name='owner',
        ),
        migrations.DeleteModel(
            name='ApiKey',
        ),
        migrations.DeleteModel(
            name='Binding',
        ),
        migrations.DeleteModel(
            name='CallLog',
        ),
        migrations.DeleteModel(
            name='McpInstance',
        ),
            ],
        ),
    ]
