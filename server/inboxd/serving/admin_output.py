"""How the admin CLI shows its answers: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from inboxd.domain.operator_views import format_age
from inboxd.domain.payload_display import Shape, charset, display_payload, is_json_content_type
from inboxd.domain.unprintable import UNPRINTABLE, escape_unprintable
from inboxd.domain.validation import DEFAULT_CONTENT_TYPE
from inboxd_client.v1 import admin_pb2, types_pb2

MAX_CELL = 60


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; cells are single lines cut at 60 characters."""
    cells = [list(headers), *([_cell(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _cell(value: str) -> str:
    # Escaped at the output boundary: a worker id, an error or a namespace is anybody's text.
    text = escape_unprintable(" ".join(value.split()))
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def state_name(value: int) -> str:
    return types_pb2.EventState.Name(value).removeprefix("EVENT_STATE_")


def action_state_name(value: int) -> str:
    return types_pb2.ActionState.Name(value).removeprefix("ACTION_STATE_")


def when(ts: Timestamp) -> str:
    """An instant in UTC to the second; "-" when absent."""
    if not ts.seconds and not ts.nanos:
        return "-"
    return datetime.fromtimestamp(ts.seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _duration(d: Duration, present: bool) -> timedelta | None:
    return d.ToTimedelta() if present else None


def stats_table(response: admin_pb2.StatsResponse) -> str:
    rows = [
        [
            s.namespace,
            str(s.pending),
            str(s.processing),
            str(s.completed),
            str(s.dead_lettered),
            _flow(s),
            format_age(_duration(s.oldest_claimable_age, s.HasField("oldest_claimable_age"))),
            str(s.unresolved_actions),
            str(s.blocked_ordering_keys),
            format_age(_duration(s.oldest_blocked_age, s.HasField("oldest_blocked_age"))),
            str(s.connected_workers),
        ]
        for s in response.namespaces
    ]
    headers = [
        "NAMESPACE", "PENDING", "PROCESSING", "COMPLETED", "DEAD", "FLOW", "OLDEST CLAIMABLE", "UNRESOLVED ACTIONS",
        "BLOCKED KEYS", "OLDEST BLOCKED", "WORKERS",
    ]  # fmt: skip
    return table(headers, rows)


def _flow(s: admin_pb2.NamespaceStats) -> str:
    """The flow-control rule governing the namespace, beside its oldest age: a paused one says why it grows."""
    if s.paused:
        return f"PAUSED ({s.flow_rule})"
    return s.flow_rule or "-"


def events_table(events: Sequence[admin_pb2.EventSummary]) -> str:
    # WORKER and LEASE EXPIRES: who holds a PROCESSING event, and until when ("-" for the others).
    rows = [
        [
            e.namespace, e.event_key, e.event_type, state_name(e.state), str(e.attempt), when(e.accepted_at),
            e.worker_id or "-", when(e.lease_expires_at), e.last_error,
        ]
        for e in events
    ]  # fmt: skip
    headers = ["NAMESPACE", "KEY", "TYPE", "STATE", "ATTEMPT", "ACCEPTED", "WORKER", "LEASE EXPIRES", "LAST ERROR"]
    return table(headers, rows)


def dead_letters_table(events: Sequence[admin_pb2.EventSummary]) -> str:
    rows = [[e.namespace, e.event_key, e.event_type, str(e.attempt), when(e.updated_at), e.last_error] for e in events]
    return table(["NAMESPACE", "KEY", "TYPE", "ATTEMPTS", "DEAD SINCE", "LAST ERROR"], rows)


def _copy_payload(number: int, copy: admin_pb2.ConflictingCopy) -> str:
    """Where the copy's payload is: below when the answer has it (show --conflict-payloads), else size and digest."""
    if copy.payload:
        return f"copy {number}, below"
    if copy.payload_sha256:
        return f"{copy.payload_size} bytes, sha256 {copy.payload_sha256.hex()[:16]}"
    return "-"


def terminal_safe(text: str, *, lines: bool = True) -> str:
    """Text with its control characters as escapes (\\x1b), so a payload cannot drive the terminal.

    Newlines and tabs are kept when `lines`; C1 controls (\\x9b is a CSI) are escaped too.
    """
    kept = "\n\t" if lines else ""
    return UNPRINTABLE.sub(lambda m: m.group() if m.group() in kept else _escape_one(m.group()), text)


def _escape_one(char: str) -> str:
    """\\x1b for a control character (as Python writes it), \\u202e for the rest (bidi, zero-width, separators)."""
    if unicodedata.category(char) == "Cc":
        return repr(char)[1:-1]
    return f"\\u{ord(char):04x}"


def payload_text(title: str, payload: bytes, content_type: str) -> str:
    """A payload under a title naming its content type and size, laid out by its shape (domain/payload_display)."""
    shown = display_payload(payload, content_type)
    if not payload:
        # On the wire an empty payload and a dropped one look alike; a JSON payload is never empty.
        why = (
            "dropped by payload retention"
            if is_json_content_type(shown.content_type)
            else "empty, or dropped by retention"
        )
        return f"{title} ({terminal_safe(shown.content_type, lines=False)})\n- ({why})"
    head = f"{title} ({terminal_safe(shown.content_type, lines=False)}, {shown.size:,} bytes"
    head += ", as hex)" if shown.shape is Shape.HEX else ")"
    if shown.shape is Shape.FORM:
        names = [terminal_safe(name, lines=False) for name, _ in shown.fields]
        width = min(max((len(n) for n in names), default=0), MAX_CELL // 2)
        body = "\n".join(
            f"{name.ljust(width)}  {terminal_safe(value, lines=False)}"
            for name, (_, value) in zip(names, shown.fields, strict=True)
        )
        body = body or "- (no fields)"
    else:
        body = terminal_safe(shown.text)
    return head + "\n" + body + (f"\n({shown.note})" if shown.note else "")


def event_text(event: admin_pb2.Event) -> str:
    """The whole record: fields, then claims, actions and their history, conflicts, replays, and the payload."""
    s = event.summary
    fields = [
        ("namespace", s.namespace),
        ("key", s.event_key),
        ("type", s.event_type),
        ("state", state_name(s.state)),
        ("attempt", str(s.attempt)),
        ("accepted", when(s.accepted_at)),
        ("available", when(s.available_at)),
        ("updated", when(s.updated_at)),
        ("lease expires", when(event.lease_expires_at)),
        ("completed", when(event.completed_at)),
        ("disposition", _disposition(event.disposition)),
        ("disposition reason", event.disposition_reason),
        ("message id", event.message_id),
        ("ordering key", event.ordering_key),
        ("revision", str(event.revision)),
        ("content type", terminal_safe(event.content_type or DEFAULT_CONTENT_TYPE, lines=False)),
        ("last error", s.last_error),
    ]
    width = max(len(name) for name, _ in fields)
    parts = ["\n".join(f"{name.ljust(width)}  {escape_unprintable(value) or '-'}" for name, value in fields)]
    claims = [
        [str(c.fencing_token), c.worker_id, str(c.attempt), when(c.claimed_at), when(c.ended_at), c.outcome or "live"]
        for c in event.claims
    ]
    parts.append("claims\n" + table(["FENCING", "WORKER", "ATTEMPT", "CLAIMED", "ENDED", "OUTCOME"], claims))
    actions = [
        [a.action, action_state_name(a.state), a.idempotency_key, a.external_ref, str(a.fencing_token)]
        for a in event.actions
    ]
    parts.append("actions\n" + table(["ACTION", "STATE", "IDEMPOTENCY KEY", "EXTERNAL REF", "FENCING"], actions))
    # "kept only": an older claim's outcome (or a repeat), answered OK without moving the action.
    history = [
        [
            h.action,
            action_state_name(h.state),
            str(h.fencing_token),
            "applied" if h.applied else "kept only",
            when(h.recorded_at),
            h.detail,
        ]
        for h in event.action_history
    ]
    parts.append("action history\n" + table(["ACTION", "STATE", "FENCING", "EFFECT", "RECORDED", "DETAIL"], history))
    conflicts = [
        [
            c.event_type,
            when(c.received_at),
            terminal_safe(c.content_type or DEFAULT_CONTENT_TYPE, lines=False),
            _copy_payload(number, c),
        ]
        for number, c in enumerate(event.conflicts, start=1)
    ]
    received = f" ({event.conflict_count} received" + (
        f"; {event.conflicts_overflow.copies} beyond the first 20 only counted)"
        if event.HasField("conflicts_overflow")
        else ")"
    )
    title = "conflicting copies" + (received if event.conflict_count else "")
    parts.append(title + "\n" + table(["TYPE", "RECEIVED", "CONTENT TYPE", "PAYLOAD"], conflicts))
    replays = [[r.actor, when(r.replayed_at), state_name(r.state_before), r.reason] for r in event.replays]
    parts.append("replays\n" + table(["ACTOR", "WHEN", "FROM", "REASON"], replays))
    acts = [
        [_act_name(a.kind), a.subject, a.actor, when(a.acted_at), a.before, a.after, a.reason]
        for a in event.operator_actions
    ]
    parts.append("operator actions\n" + table(["ACT", "ACTION", "ACTOR", "WHEN", "BEFORE", "AFTER", "REASON"], acts))
    if event.deliveries:
        parts.append("deliveries (destinations' POSTs)\n" + deliveries_table(event.deliveries))
    metadata = json.dumps(dict(event.metadata), indent=2, sort_keys=True) if event.metadata else "-"
    parts.append("metadata\n" + escape_unprintable(metadata, keep="\n"))
    parts.extend(
        payload_text(f"conflicting copy {number}'s payload", c.payload, c.content_type)
        for number, c in enumerate(event.conflicts, start=1)
        if c.payload
    )
    parts.append(payload_text("payload", event.payload, event.content_type))
    return "\n\n".join(parts)


def deliveries_table(attempts: Sequence[admin_pb2.DeliveryAttempt]) -> str:
    """Destinations' POSTs: when, the status (- for none), the latency, the outcome, and the error or the answer."""
    rows = [
        [
            a.destination,
            a.event_key,
            when(a.attempted_at),
            str(a.attempt),
            str(a.fencing_token),
            str(a.status_code or "-"),
            f"{a.latency.ToTimedelta().total_seconds() * 1000:.0f} ms",
            a.outcome,
            terminal_safe((a.error or a.response_excerpt.decode("utf-8", "replace"))[:120], lines=False),
        ]
        for a in attempts
    ]
    headers = ["DESTINATION", "KEY", "WHEN", "ATTEMPT", "FENCING", "STATUS", "LATENCY", "OUTCOME", "ERROR OR ANSWER"]
    return table(headers, rows)


def _act_name(kind: admin_pb2.OperatorActionKind) -> str:
    return admin_pb2.OperatorActionKind.Name(kind).removeprefix("OPERATOR_ACTION_KIND_").lower()


def _disposition(value: types_pb2.Disposition) -> str:
    if value == types_pb2.DISPOSITION_UNSPECIFIED:
        return ""
    return types_pb2.Disposition.Name(value).removeprefix("DISPOSITION_")


def as_json(message: Message) -> dict[str, Any]:
    """A message as a dict with proto field names; payloads inlined as JSON rather than base64."""
    # Zeros included: a script reads "dead_lettered": "0" rather than a missing key.
    out = MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    _inline_payloads(message, out)
    return out


def _inline_payloads(message: Message, out: dict[str, Any]) -> None:
    for field, value in message.ListFields():
        if field.name == "payload" and isinstance(value, bytes):
            _inline_payload(value, str(getattr(message, "content_type", "")), out)
        elif field.message_type is not None and field.name in out:
            if field.is_repeated and not field.message_type.GetOptions().map_entry:
                for item, item_out in zip(value, out[field.name], strict=True):
                    _inline_payloads(item, item_out)
            elif not field.is_repeated:
                _inline_payloads(value, out[field.name])


def _inline_payload(data: bytes, content_type: str, out: dict[str, Any]) -> None:
    """A JSON payload as its value, any other as its text in its charset; bytes that are neither stay base64."""
    shown = display_payload(data, content_type)
    if shown.shape is Shape.JSON:
        out["payload"] = json.loads(data)
    elif shown.shape is Shape.HEX:
        out["payload_encoding"] = "base64"  # MessageToDict's own rendering of bytes, left as it is
    else:
        out["payload"] = data.decode(charset(shown.content_type))
