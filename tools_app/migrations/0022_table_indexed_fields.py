from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tools_app', '0021_call_details'),
    ]

    operations = [
        migrations.AddField(
            model_name='calllog',
            name='notes',
            field=models.TextField(blank=True, default=''),
        ),
        migrations.AddField(
            model_name='table',
            name='indexed_fields',
            field=models.JSONField(blank=True, default=list, help_text='Record field names whose filters and sorts the database answers from an index.'),
        ),
    ]
