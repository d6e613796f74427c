"""The timeline's index covers its whole order (-queued_at, -id): a page by cursor is
one index seek, a deep offset skips index entries instead of rows, and no sort is left
for the id tie-break. It replaces (agent, -queued_at), a prefix of it."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0002_user_tokens"),
        ("mailbox", "0001_initial"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="mailboxitem",
            index=models.Index(fields=["agent", "-queued_at", "-id"], name="idx_mailbox_agent_timeline"),
        ),
        migrations.RemoveIndex(
            model_name="mailboxitem",
            name="idx_mailbox_agent_queued",
        ),
    ]
