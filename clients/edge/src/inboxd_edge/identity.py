"""Where an event's identity may come from: only what the signature covers, or what the route's configuration fixes.

A provider signs the body, and some schemes a header or two beside it (the
Standard Webhooks id and timestamp, an HMAC scheme's timestamp). Anything else
in a request is the sender's to choose: a re-posted delivery, still inside its
timestamp window, could otherwise be given another event type, another key or
another namespace, and each would be a new event. So the namespace, the key,
the type and the ordering key come only from:
- the body (``body:``, ``digest:sha256``), or a header the route's scheme signs;
- the route's configuration (``const:``, the namespace template's literal text);
- a path placeholder the route binds to per-account secrets (``path_secrets``):
  a delivery then verifies only on its own account's path.

Two routes, or two accounts of one route, may not share a secret: a delivery
signed for one would verify on the other and take the other's fixed identity.
Every path placeholder is held to a plain pattern, so a path cannot smuggle a
`/`, a `%` escape or an unbounded name into a namespace.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from inboxd_edge.sources import Source

# What a path placeholder may hold unless the route gives its own pattern: one plain segment.
PLACEHOLDER_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._~@+-]*"
MAX_PLACEHOLDER_LENGTH = 128
_PLAIN_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def constrained_path(path: str) -> str:
    """The route's path with every bare ``{name}`` held to PLACEHOLDER_PATTERN (``{name:regex}`` is kept)."""
    return _PLAIN_PLACEHOLDER.sub(lambda m: "{" + m.group(1) + ":" + PLACEHOLDER_PATTERN + "}", path)


def placeholder_values_fit(values: Mapping[str, str]) -> bool:
    """False when a placeholder's value is longer than any account name should be."""
    return all(len(value) <= MAX_PLACEHOLDER_LENGTH for value in values.values())


def check_signed(
    field: str, source: Source, *, scheme: str, verifier_headers: frozenset[str], bound: str | None
) -> None:
    """Raises ValueError when `field` would come from a part of the request nobody signed."""
    if source.kind in ("body", "digest", "const"):
        return
    if source.kind == "header" and source.name.lower() in verifier_headers:
        return
    if source.kind == "path" and source.name == bound:
        return
    if source.kind == "path":
        fix = (
            f"bind {{{source.name}}} to per-account secrets ([routes.path_secrets] placeholder = "
            f'"{source.name}"), or take it from the body'
        )
    else:
        signed = ", ".join(sorted(verifier_headers)) or "no header"
        fix = f"the {scheme} signature covers the body and {signed}: take it from the body, or fix it with const:"
    raise ValueError(
        f"{field} comes from {source}, which the signature does not cover: a re-posted delivery could choose it. {fix}"
    )


# A GitHub App has one webhook (and secret) for every event: its type can only come from this unsigned header.
GITHUB_EVENT_HEADER = "x-github-event"


def unsigned_type_allowed(scheme: str, event_type: Source, event_key: Source, key_includes_type: bool) -> bool:
    """True for a github route typed by X-GitHub-Event whose key is the body's digest, and nothing else.

    The header is unsigned, so a re-posted delivery may carry another type. With the body's digest as the key
    (and the type kept out of it) the re-post names the same event under another type: inboxd answers CONFLICT
    and keeps the original, so the header can mislabel nothing.
    """
    return (
        scheme == "github"
        and event_type.kind == "header"
        and event_type.name.lower() == GITHUB_EVENT_HEADER
        and event_key.kind == "digest"
        and not key_includes_type
    )


def namespace_sources(
    template_names: Iterable[str], variables: Mapping[str, Source], path_params: Iterable[str]
) -> dict[str, Source]:
    """Each name the namespace template uses, as the source it is read from (a var, or the path's placeholder)."""
    params = set(path_params)
    return {
        name: variables[name] if name in variables else Source("path", name)
        for name in template_names
        if name in variables or name in params
    }


def fingerprint(secret: str) -> str:
    """A secret's digest, to compare secrets across routes without keeping them side by side."""
    return hashlib.sha256(secret.encode()).hexdigest()


def check_unshared(owners: Iterable[tuple[str, str]]) -> None:
    """Raises ValueError naming two owners (routes or a route's accounts) that share a secret's fingerprint."""
    seen: dict[str, str] = {}
    for owner, digest in owners:
        other = seen.setdefault(digest, owner)
        if other != owner:
            raise ValueError(
                f"{other} and {owner} share a secret: a delivery signed for one would verify on the other "
                "and take its namespace and type. Give each its own secret."
            )
