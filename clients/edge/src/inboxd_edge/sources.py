"""Where a value comes from in a webhook request: the body, a header, or the route's path.

A source is written as one string in the configuration:

- ``body:/data/object/id`` a JSON pointer (RFC 6901) into a JSON body;
- ``body:data.object.id`` the same as a dotted path; ``body:MessageSid`` a field of a form body;
- ``digest:sha256`` the hex SHA-256 of the raw body, for providers whose body
  carries no event id but whose retries resend the same bytes;
- ``header:X-MailHub-Event`` a request header (case-insensitive);
- ``path:account`` a ``{account}`` placeholder of the route's path;
- ``const:message.received`` a value fixed by the route's configuration.

Body and digest sources and ``const:`` values are covered by the signature or by the
configuration; headers only where the route's scheme signs them, and path
placeholders only where the route binds them to per-account secrets
(``inboxd_edge.identity`` holds those rules).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

SourceKind = Literal["body", "digest", "header", "path", "const"]


class MissingValue(Exception):
    """The request has no usable value where a source points; the edge answers 400."""

    def __init__(self, source: Source) -> None:
        super().__init__(f"no string or integer at {source}")
        self.source = source


@dataclass(frozen=True)
class Request:
    """The parts of an authenticated request that sources read from."""

    # The JSON value, a form's fields, or None for a body of another type (bodies.document).
    document: Any
    headers: Mapping[str, str]
    path_params: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True)
class Source:
    """One configured place to read a string from."""

    kind: SourceKind
    name: str
    tokens: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Source:
        """Parses ``kind:where``; raises ValueError naming the accepted forms."""
        kind, sep, where = text.partition(":")
        if not sep or not where:
            raise ValueError(
                f"source {text!r} must look like body:/pointer, body:dotted.path, digest:sha256, header:Name, "
                "path:name or const:value"
            )
        if kind == "body":
            return cls("body", where, _body_tokens(where))
        if kind == "digest":
            if where != "sha256":
                raise ValueError(f"source {text!r}: the one digest is digest:sha256")
            return cls("digest", where)
        if kind == "header":
            return cls("header", where)
        if kind == "path":
            return cls("path", where)
        if kind == "const":
            return cls("const", where)
        raise ValueError(f"source {text!r}: unknown kind {kind!r} (body, digest, header, path or const)")

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"

    def read(self, request: Request) -> str:
        """The value as a string; raises MissingValue when absent, empty, or not a string or integer."""
        value: Any
        if self.kind == "const":
            return self.name
        if self.kind == "digest":
            return hashlib.sha256(request.body).hexdigest()
        if self.kind == "header":
            value = request.headers.get(self.name)
        elif self.kind == "path":
            value = request.path_params.get(self.name)
        else:
            value = walk(request.document, self.tokens)
        # bool is an int subclass, but `true` is never an identifier.
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            raise MissingValue(self)
        return str(value)


def _body_tokens(where: str) -> tuple[str, ...]:
    if where.startswith("/"):
        # RFC 6901: "~1" is "/" and "~0" is "~", unescaped in that order.
        return tuple(t.replace("~1", "/").replace("~0", "~") for t in where[1:].split("/"))
    return tuple(where.split("."))


def walk(document: Any, tokens: tuple[str, ...]) -> Any:
    """The value at `tokens` in a parsed body, or None."""
    node = document
    for token in tokens:
        if isinstance(node, dict):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


def drop_pointer(document: Any, tokens: tuple[str, ...]) -> None:
    """Removes the member a body source points at, if present (for delivery-only fields)."""
    if not tokens:
        return
    parent = walk(document, tokens[:-1])
    if isinstance(parent, dict):
        parent.pop(tokens[-1], None)
