"""Daily reports of manager agents and the reminders agents set for themselves."""
