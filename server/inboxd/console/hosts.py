"""Which Host names the console answers, and which POSTs come from its own pages.

A page on any web site can make a browser talk to 127.0.0.1 by DNS
rebinding: its own name then resolves to loopback, and the request carries
that name in its Host header. Answering only the names the console is
known by refuses it before anything else runs. A page on another port of
the same host is another origin but the same site, and its cookies are
shared with ours: Origin (or Sec-Fetch-Site) on every POST refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

# The names loopback goes by, with the console's port, always allowed.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


def _bracketed(host: str) -> str:
    """An IPv6 literal as a Host header writes it."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class AllowedHosts:
    """The Host header values the console answers: each name with its port, or a name's own port."""

    def __init__(self, listen_host: str, port: int, extra: Iterable[str] = (), *, https: bool) -> None:
        self.scheme = "https" if https else "http"
        names = [*LOOPBACK_NAMES]
        host = listen_host.strip().lower()
        # A wildcard (0.0.0.0, [::], empty) is no name a browser would send.
        if host not in ("", "0.0.0.0", "::", "[::]"):
            names.append(_bracketed(host))
        allowed = {f"{name}:{port}" for name in names}
        for entry in (e.strip().lower() for e in extra):
            if not entry:
                continue
            name, sep, entry_port = entry.rpartition(":")
            if sep and entry_port.isdigit() and not name.endswith(":"):
                allowed.add(entry)  # a name with the port a proxy in front serves it on
            else:
                # A name alone: as a proxy on the scheme's default port sends it, or with our own port.
                allowed.update({entry, f"{entry}:{port}"})
        self.allowed = frozenset(allowed)

    def allows(self, host_header: str | None) -> bool:
        return host_header is not None and host_header.strip().lower() in self.allowed

    def cross_site_refusal(self, origin: str | None, fetch_site: str | None) -> str | None:
        """Why a POST does not come from the console's own pages, or None.

        Browsers send Sec-Fetch-Site and Origin with a POST. Under the
        console's `Referrer-Policy: no-referrer` a browser writes Origin as
        "null" even for our own forms: then Sec-Fetch-Site alone must say
        same-origin (a sandboxed frame on another site says cross-site). A
        client that sends neither is no browser, so no other site's page
        drives it: the CSRF token still applies.
        """
        if fetch_site is not None and fetch_site.strip().lower() != "same-origin":
            return f"a POST from another site (Sec-Fetch-Site: {fetch_site[:50]!r})"
        if origin is None:
            return None
        seen = origin.strip().lower()
        if seen == "null":
            return None if fetch_site is not None else "a POST from an opaque origin ('null')"
        parts = urlsplit(seen)
        if parts.scheme != self.scheme or parts.netloc not in self.allowed:
            return f"a POST from another origin ({origin[:200]!r})"
        return None
