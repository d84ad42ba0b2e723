"""What keeps the explorer safe by default: who may look (a token once it listens beyond
loopback), which Host a browser may name (no DNS rebinding onto a loopback explorer),
and which forms may act (read-only unless allowed; each form carries this process's CSRF
token and comes from the explorer's own pages). Pure checks: the app applies them."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["COOKIE", "TOKEN_ENV", "Guard", "is_loopback"]

COOKIE = "sbqueue_explorer"
TOKEN_ENV = "SBQUEUE_EXPLORER_TOKEN"
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this
    machine's loopback only."""
    bare = host.strip().strip("[]").lower()
    if bare in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Guard:
    """The explorer's rules for one process: the token people must give (None on
    loopback without one), whether actions are allowed, and the CSRF token its forms
    carry (new each start)."""

    token: str | None = None
    allow_actions: bool = False
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    def admits(self, headers: Mapping[str, str], cookies: Mapping[str, str],
               query: Mapping[str, str]) -> bool:
        """Whether the request carries the token: ``Authorization: Bearer``, the cookie a
        first visit with ``?token=`` set, or that query itself. Always, without a token."""
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        given = [auth[7:] if auth.lower().startswith("bearer ") else "",
                 cookies.get(COOKIE, ""), query.get("token", "")]
        return any(g and hmac.compare_digest(g.encode(), self.token.encode()) for g in given)

    def refuses_form(self, form: Mapping[str, str], headers: Mapping[str, str]) -> str | None:
        """Why a posted action form is refused (None when it may run): actions not
        allowed, a missing or wrong CSRF token, or a request another site started."""
        if not self.allow_actions:
            return "the explorer is read-only: start it with --allow-actions to act"
        if not hmac.compare_digest(str(form.get("csrf", "")).encode(), self.csrf.encode()):
            return "the form's CSRF token is missing or stale: reload the page and try again"
        if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "the request came from another site"
        origin = headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != headers.get("host", ""):
            return f"the request came from another origin ({origin})"
        return None
