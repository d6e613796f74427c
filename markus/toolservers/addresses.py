"""Which http tool-server URLs are refused: those whose host is, or resolves to, an
address of this machine or of the networks it sits in (loopback, link-local: the cloud's
metadata service, private and unique-local, unspecified, multicast, reserved), or that
name this server itself (``ALLOWED_HOSTS``). The workers connect from inside the
network: without this check a staff user's URL reaches what the network hides.
``MARKUS_TOOLSERVER_ALLOW_PRIVATE`` allows them (a tool server on the same host).

Checked when a URL is set and again each time a worker connects (a DNS answer may
change). A name that does not resolve is not refused here: nothing is reached through it."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

SETTING = "MARKUS_TOOLSERVER_ALLOW_PRIVATE"
# What makes an address refused, checked in this order (a reserved address is private
# too, as Python sees it: the narrower word is said).
_KINDS = (
    ("is_loopback", "a loopback address"),
    ("is_link_local", "a link-local address"),
    ("is_unspecified", "an unspecified address"),
    ("is_multicast", "a multicast address"),
    ("is_reserved", "a reserved address"),
    ("is_private", "a private address"),
)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def refusal(url: str) -> str:
    """Why an http server's URL may not be used, or "" if it may."""
    if settings.MARKUS["TOOLSERVER_ALLOW_PRIVATE"]:
        return ""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return ""  # the URL field's own check refuses it
    allow = f"set {SETTING}=true to allow a tool server on this machine or its networks"
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        kind = _kind(literal)
        return f"url: the host is {host}, {kind}; {allow}" if kind else ""
    if host in _own_hosts():
        return f"url: {host} is this server's own host (ALLOWED_HOSTS); {allow}"
    for address in _resolved(host, parts.port):
        kind = _kind(address)
        if kind:
            return f"url: {host} resolves to {address}, {kind}; {allow}"
    return ""


def _own_hosts() -> set[str]:
    """ALLOWED_HOSTS' names of this server (not its wildcards: ``*``, ``.example.org``)."""
    return {h.lower().rstrip(".") for h in settings.ALLOWED_HOSTS if "*" not in h and not h.startswith(".")}


def _resolved(host: str, port: int | None) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def _kind(address: Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    for attribute, kind in _KINDS:
        if getattr(address, attribute):
            return kind
    return "" if address.is_global else "not a public address"
