"""Bodies that hold several events (Microsoft Graph's ``value``), and types the route does not list.

Each item of a route's ``items`` array is its own event: named from the item
(its ``body:`` sources read the item), forwarded as the item alone, in
canonical JSON without ``clientState`` (Graph's shared value, never stored),
so a retried notification is the same bytes and a DUPLICATE. The delivery is
answered 202 once every item is accepted; an item inboxd could not take
makes the whole delivery's answer, so the provider retries it and the items
already taken come back as duplicates.

A type outside ``allowed_types`` is refused 422 (``other_types = "reject"``,
the default), or answered 200 ``ignored`` and dropped (``"ignore"``: a
provider that counts 4xx as failures keeps the endpoint healthy while the
route file catches up), or taken as any other (``"accept"``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from inboxd_client.v1 import types_pb2
from inboxd_edge import observations
from inboxd_edge.config import Route
from inboxd_edge.forward import Answer, Forwarder
from inboxd_edge.keys import ResolvedEvent, UnsupportedType, resolve
from inboxd_edge.reply import Reply
from inboxd_edge.sources import MissingValue, Request, walk

# Graph's clientState is the route's shared value: checked, then dropped from what is stored.
_DROPPED = ("clientState",)


def other_type(route: Route, event_type: str) -> Reply:
    """The answer for a type the route does not list, by its other_types."""
    if route.other_types == "ignore":
        observations.ignored_type(route.name, event_type)
        return Reply(Answer(200, "ignored"), event_type=event_type)
    return Reply(Answer(422, "unsupported_type"), event_type=event_type)


async def receive_items(
    route: Route,
    forwarder: Forwarder,
    *,
    document: object,
    headers: Mapping[str, str],
    path_params: Mapping[str, str],
    trace_context: types_pb2.TraceContext | None,
) -> Reply:
    """Names and forwards each item of the route's items array as its own event."""
    assert route.items is not None
    items = walk(document, route.items)
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return Reply(Answer(400, "malformed"), reason="no array of objects at body:/" + "/".join(route.items))
    events: list[ResolvedEvent] = []
    for item in items:
        kept = {k: v for k, v in item.items() if k not in _DROPPED}
        body = json.dumps(kept, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
        try:
            events.append(resolve(route, Request(kept, headers, path_params, body), content_type="application/json"))
        except UnsupportedType as exc:
            if route.other_types != "ignore":
                return other_type(route, str(exc))
            observations.ignored_type(route.name, str(exc))
        except MissingValue as exc:
            return Reply(Answer(400, "malformed"), reason=str(exc))
    types = ",".join(sorted({e.event_type for e in events})) or "-"
    answers = [await forwarder.accept(event, trace_context) for event in events]
    if failed := [a for a in answers if a.status >= 300]:
        return Reply(max(failed, key=lambda a: a.status), event_type=types)
    if not answers:
        return Reply(Answer(202, "ignored"), event_type=types)
    outcome = "accepted" if any(a.outcome == "accepted" for a in answers) else answers[0].outcome
    return Reply(Answer(202, outcome), event_type=types, event=events[0] if len(events) == 1 else None)
