"""A small HTTP client for hub mode (stdlib ``urllib``): the CLI talking to a remote
Markus server with a token."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class HubError(Exception):
    """A refusal or a transport failure; the message is one line for the CLI. A hub's
    answer keeps its HTTP ``status`` and its body's ``code``, ``detail`` and ``fields``;
    a hub that cannot be reached is ``code: unreachable``, a bad hub URL ``usage``."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int | None = None,
        detail: str | None = None,
        fields: Any = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.detail = detail
        self.fields = fields


def authorization(token: str) -> str:
    """Agent tokens (``mk_…``) are Bearer tokens, anything else a user's DRF token;
    an explicit ``Bearer …`` / ``Token …`` is kept as given."""
    token = token.strip()
    if token.split(" ", 1)[0].lower() in ("bearer", "token") and " " in token:
        return token
    return f"Bearer {token}" if token.startswith("mk_") else f"Token {token}"


class HubClient:
    def __init__(self, base_url: str, token: str | None, *, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise HubError(f"hub URL must be http(s)://host[:port], got {base_url!r}", code="usage")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        url = self.base_url + path
        params = {k: v for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", authorization(self.token))
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise _refusal(exc) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise HubError(f"cannot reach the hub at {self.base_url}: {reason}", code="unreachable") from None
        except ValueError:
            raise HubError(
                f"the hub at {self.base_url} answered something that is not JSON", code="bad_answer"
            ) from None


def _refusal(exc: urllib.error.HTTPError) -> HubError:
    return hub_refusal(exc.code, exc.read(), str(exc.reason or "error"))


def hub_refusal(status: int, raw: bytes, reason: str) -> HubError:
    """The hub's error answer (``{"detail", "code", "fields"?}``) as a HubError, from
    its status, its body and the status's reason phrase (whatever client read it)."""
    try:
        data = json.loads(raw or b"{}")
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("detail"):
        detail = " ".join(str(data["detail"]).split())
    elif data:
        detail = " ".join(json.dumps(data).split())
    else:
        detail = reason
    body = data if isinstance(data, dict) else {}
    given = body.get("code")
    code = given if isinstance(given, str) and given else f"http_{status}"
    return HubError(f"{status} {detail}", code=code, status=status, detail=detail, fields=body.get("fields"))
