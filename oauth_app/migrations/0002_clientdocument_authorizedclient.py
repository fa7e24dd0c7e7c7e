from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("oauth_app", "0001_initial"),
        ("oauth2_provider", "0022_refreshtoken_token_family_index"),
    ]

    operations = [
        migrations.CreateModel(
            name='ClientDocument',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('client_id', models.CharField(max_length=255, unique=True)),
                ('logo_uri', models.URLField(blank=True, max_length=2000)),
                ('client_uri', models.URLField(blank=True, max_length=2000)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
        ),
        migrations.CreateModel(
            name='AuthorizedClient',
            fields=[
            ],
            options={
                'verbose_name': 'authorized client',
                'verbose_name_plural': 'authorized clients',
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('oauth2_provider.refreshtoken',),
        ),
    ]
