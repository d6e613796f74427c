"""A notification's link: a path on this site, nothing a browser could take off it."""

from __future__ import annotations

from typing import TypeGuard

from django.utils.http import url_has_allowed_host_and_scheme

LINK_RULE = "a path on this site: one '/' first, then neither '/' nor '\\', no backslash, control character or scheme"


def is_local_path(path: object) -> TypeGuard[str]:
    """``/work?task=t1``, not ``//host``, ``/\\host`` (browsers read it as ``//host``),
    ``https://…`` or ``javascript:…``; tabs and newlines, which browsers drop from a
    URL, are refused too."""
    if not isinstance(path, str) or not path.startswith("/") or path[1:2] in ("/", "\\"):
        return False
    if "\\" in path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return False
    return url_has_allowed_host_and_scheme(path, allowed_hosts=None)
