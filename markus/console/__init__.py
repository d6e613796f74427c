"""The operator console: what the Django admin needs beyond plain ModelAdmins (the
agents' live columns, the mailbox retry / drop semantics, the date range filter and
the dashboard with its server-rendered charts)."""
