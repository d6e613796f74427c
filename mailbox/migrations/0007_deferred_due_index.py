"""Deferred items by when they come due (``idx_mailbox_deferred_due``): the sweep's
backstops seek it instead of walking every item of every agent."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mailbox", "0006_fk_index_served_by_composites"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="mailboxitem",
            index=models.Index(
                condition=models.Q(("status", "deferred")),
                fields=["deferred_until", "agent"],
                name="idx_mailbox_deferred_due",
            ),
        ),
    ]
