"""The per-route adapter: turns an authenticated, parsed webhook into the event inboxd should accept.

The payload is the body as it arrived, with its content type, and the
signature's inputs ride in the metadata (inboxd_edge.evidence), so the
provider's signature can be checked again from the claimed event.

Identity follows DESIGN.md: the namespace names the source (provider, account,
subscription), the key names one logical event and is stable across retries.
The delivery id describes an attempt, so it goes to metadata and never into
the key; the event type joins the key only where the route says the provider's
id does not tell types apart.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from inboxd_edge.bodies import is_json
from inboxd_edge.config import Route
from inboxd_edge.sources import MissingValue, Request, Source, drop_pointer


class UnsupportedType(Exception):
    """The event type is not one the route accepts; the edge answers 422."""


@dataclass(frozen=True)
class ResolvedEvent:
    """What the edge sends to Accept."""

    namespace: str
    event_key: str
    event_type: str
    payload: bytes
    metadata: Mapping[str, str] = field(default_factory=dict)
    # The request's Content-Type as sent ("" when it sent none: inboxd then takes application/json).
    content_type: str = ""
    message_id: str = ""
    ordering_key: str = ""
    delivery_id: str = ""


def event_type_of(route: Route, request: Request) -> str:
    """The event type, checked against the route's allowed types (raises MissingValue or UnsupportedType)."""
    event_type = route.event_type.read(request)
    if event_type not in route.allowed_types and route.other_types != "accept":
        raise UnsupportedType(event_type)
    return event_type


def resolve(
    route: Route, request: Request, *, content_type: str = "", signature: Mapping[str, str] | None = None
) -> ResolvedEvent:
    """Names the event; raises MissingValue (400) or UnsupportedType (422).

    `signature` is what verifying read (evidence.signature_metadata): stored
    unless the payload is trimmed, which would no longer verify.
    """
    event_type = event_type_of(route, request)
    names = {**request.path_params, **{name: src.read(request) for name, src in route.variables.items()}}
    namespace = route.namespace.format_map({k: _segment(v, k in route.namespace_paths) for k, v in names.items()})
    logical_id = route.event_key.read(request)
    event_key = f"{event_type}:{logical_id}" if route.key_includes_type else logical_id
    delivery_id = _optional(route.delivery_id, request)
    metadata = {"edge.route": route.name, "edge.scheme": route.scheme}
    if delivery_id:
        metadata["delivery_id"] = delivery_id
    for header in route.keep_headers:
        if (value := request.headers.get(header)) is not None:
            metadata[f"header.{header.lower()}"] = value
    trimmed = bool(route.payload_drop) and is_json(content_type)
    if signature and not trimmed:
        metadata.update(signature)
    return ResolvedEvent(
        namespace=namespace,
        event_key=event_key,
        event_type=event_type,
        payload=_trimmed(route, request.document) if trimmed else request.body,
        content_type=content_type,
        metadata=metadata,
        message_id=_optional(route.message_id, request),
        ordering_key=_optional(route.ordering_key, request),
        delivery_id=delivery_id,
    )


def _segment(value: str, keep_slash: bool) -> str:
    # A "/" inside a value would let ("a/b", "c") and ("a", "b/c") name one namespace: escaped unless the route
    # wrote {name:path}, asking for the value's own hierarchy (a GitHub repository's owner/name).
    escaped = value.replace("%", "%25")
    return escaped if keep_slash else escaped.replace("/", "%2F")


def _optional(source: Source | None, request: Request) -> str:
    if source is None:
        return ""
    try:
        return source.read(request)
    except MissingValue:
        return ""


def _trimmed(route: Route, document: Any) -> bytes:
    """A JSON body without its delivery-only members: inboxd compares payloads on repeats."""
    trimmed = copy.deepcopy(document)
    for source in route.payload_drop:
        drop_pointer(trimmed, source.tokens)
    return json.dumps(trimmed, ensure_ascii=False, separators=(",", ":")).encode()
