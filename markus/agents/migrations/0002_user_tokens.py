"""User API tokens stored hashed (issue 11). Tokens that DRF's authtoken app stored in
plaintext (table ``authtoken_token``, when it exists) are hashed into ``user_tokens``
and deleted, so the keys their holders use keep working and no plaintext key is left."""

import datetime
import hashlib

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

LEGACY_TABLE = "authtoken_token"


def hash_plaintext_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if LEGACY_TABLE not in connection.introspection.table_names():
        return
    UserToken = apps.get_model("agents", "UserToken")
    table = connection.ops.quote_name(LEGACY_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name('key')}, user_id, created FROM {table}")
        rows = cursor.fetchall()
    tokens = []
    for key, user_id, created in rows:
        if not isinstance(created, datetime.datetime):
            created = django.utils.timezone.now()
        elif django.utils.timezone.is_naive(created):
            created = django.utils.timezone.make_aware(created, datetime.UTC)
        # The SHA-256 of the key, as markus.agents.models.hash_token computes it.
        key_hash = hashlib.sha256(key.encode()).hexdigest()
        tokens.append(UserToken(user_id=user_id, key_hash=key_hash, name="migrated", created_at=created))
    UserToken.objects.using(connection.alias).bulk_create(tokens, ignore_conflicts=True)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="UserToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key_hash", models.CharField(editable=False, max_length=64, unique=True)),
                ("name", models.CharField(blank=True, default="", max_length=100)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "db_table": "user_tokens",
                "ordering": ["created_at", "id"],
            },
        ),
        migrations.RunPython(hash_plaintext_tokens, migrations.RunPython.noop),
    ]
