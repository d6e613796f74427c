"""Which http tool-server URLs are refused: those whose host is, or resolves to, an
address of this machine or of the networks it sits in (loopback, link-local: the cloud's
metadata service, private and unique-local, unspecified, multicast, reserved), or that
name this server itself (``ALLOWED_HOSTS``). The workers connect from inside the
network: without this check a staff user's URL reaches what the network hides.
``MARKUS_TOOLSERVER_ALLOW_PRIVATE`` allows them (a tool server on the same host).

Checked when a URL is set, before each use, and at each connection a worker makes
(``pinned``): the name is resolved once, every address checked, and the connection made
to the checked address, so a DNS answer that changes in between (DNS rebinding) or a
redirect reaches nothing inside. A name that does not resolve is not refused when it is
set: nothing is reached through it."""

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


_ALLOW = f"set {SETTING}=true to allow a tool server on this machine or its networks"


class Refused(Exception):
    """A host this process may not connect to: the message says why and names the setting."""


def allowed() -> bool:
    """The operator lets tool servers reach this machine and its networks."""
    return bool(settings.MARKUS["TOOLSERVER_ALLOW_PRIVATE"])


def refusal(url: str) -> str:
    """Why an http server's URL may not be used, or "" if it may."""
    if allowed():
        return ""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        return ""  # the URL field's own check refuses it
    try:
        checked(host, parts.port or (443 if parts.scheme == "https" else 80))
    except Refused as exc:
        return f"url: {exc}"
    except (OSError, UnicodeError):
        pass  # a name that does not resolve reaches nothing
    return ""


def checked(host: str, port: int) -> list[Address]:
    """The addresses to connect to for ``host``: resolved once, every one checked.
    Refused if the host is one of this server's names or any address it resolves to is
    inside (a DNS answer mixing a public address with an inside one is refused whole);
    OSError if it does not resolve. The caller connects to these addresses, never to the
    name again (``pinned``): what was checked is what is reached."""
    guard = not allowed()  # the setting, read once for every refusal below
    host = host.rstrip(".")
    try:
        literal: Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        if guard and (kind := _kind(literal)):
            raise Refused(f"the host is {host}, {kind}; {_ALLOW}")
        return [literal]
    if guard and host.lower() in _own_hosts():
        raise Refused(f"{host} is this server's own host (ALLOWED_HOSTS); {_ALLOW}")
    found = _resolved(host, port)
    if not found:
        raise OSError(f"{host} resolves to no address")
    if guard:
        for address in found:
            if kind := _kind(address):
                raise Refused(f"{host} resolves to {address}, {kind}; {_ALLOW}")
    return found


def _own_hosts() -> set[str]:
    """ALLOWED_HOSTS' names of this server (not its wildcards: ``*``, ``.example.org``)."""
    return {h.lower().rstrip(".") for h in settings.ALLOWED_HOSTS if "*" not in h and not h.startswith(".")}


def _resolved(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (in the resolver's order, once each); OSError
    or UnicodeError if it does not resolve."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def _kind(address: Address) -> str:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    for attribute, kind in _KINDS:
        if getattr(address, attribute):
            return kind
    return "" if address.is_global else "not a public address"
