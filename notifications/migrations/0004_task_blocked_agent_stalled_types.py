from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0003_budget_exhausted_type"),
    ]

    operations = [
        migrations.AlterField(
            model_name="usernotification",
            name="type",
            field=models.CharField(
                choices=[
                    ("approval_request", "Approval Request"),
                    ("task_created", "Task Created"),
                    ("task_completed", "Task Completed"),
                    ("task_review", "Task Review"),
                    ("task_failed", "Task Failed"),
                    ("task_blocked", "Task Blocked"),
                    ("requirement_created", "Requirement Proposed"),
                    ("requirement_decision", "Requirement Decision"),
                    ("agent_report", "Agent Report"),
                    ("comment_mention", "Mention"),
                    ("budget_exhausted", "Budget Exhausted"),
                    ("agent_stalled", "Agent Stalled"),
                    ("system", "System"),
                ],
                max_length=32,
            ),
        ),
    ]
