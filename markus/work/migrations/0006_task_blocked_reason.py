from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("work", "0005_task_filing_approval_requirement_rejected_reason"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="blocked_reason",
            field=models.TextField(blank=True, default=""),
        ),
    ]
