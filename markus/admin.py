"""The project's own admin module, imported last of all (``markus`` is the last app):
the admins other apps registered get the console's rule for bad URLs."""

from __future__ import annotations

from django.contrib import admin

from markus.console.modeladmin import refuse_regex_lookups

refuse_regex_lookups(admin.site)
