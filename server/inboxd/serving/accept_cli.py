"""`inboxd accept`: events from a JSON Lines file (or stdin) sent through Accept again, for a gap after a restore.

Accept is idempotent: a line whose key inboxd still holds answers DUPLICATE
(or CONFLICT, the original kept), so sending a whole export again is safe.
Every line is read and checked before anything is sent: a file with a bad
line sends nothing. A line is either inboxd-shaped (`event_key`,
`event_type`, `payload`, optionally `namespace`, `metadata`,
`content_type`) or a provider's raw event, the whole line its payload, with
`--key-field` and `--type-field` naming where its key and type are.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable
from typing import Any

from inboxd_client.v1 import inbox_pb2, inbox_pb2_grpc

COMMANDS = ("accept",)
BATCH = 100
_OUTCOMES = {
    inbox_pb2.ACCEPT_OUTCOME_ACCEPTED: "accepted",
    inbox_pb2.ACCEPT_OUTCOME_DUPLICATE: "duplicate",
    inbox_pb2.ACCEPT_OUTCOME_CONFLICT: "conflict",
}


class BadLine(ValueError):
    """A line that cannot become an Accept; names the line and why."""


def add_accept_command(commands: Any, common: argparse.ArgumentParser) -> None:
    accept = commands.add_parser(
        "accept", parents=[common], help="send events from a JSON Lines file (or stdin) through Accept again"
    )
    accept.add_argument("file", nargs="?", default="-", help="a JSON Lines file; - or nothing: stdin")
    accept.add_argument("--namespace", "-n", default="", help="for lines that name none")
    accept.add_argument("--key-field", default="event_key", help="dotted path to each line's key (default event_key)")
    accept.add_argument("--type-field", default="event_type", help="dotted path to its type (default event_type)")
    accept.add_argument(
        "--payload-field", default="payload", help="its payload (default payload; absent: the whole line is it)"
    )
    accept.add_argument("--dry-run", action="store_true", help="check every line and say what would be sent")


def requests_from(lines: Iterable[str], args: argparse.Namespace) -> list[inbox_pb2.AcceptRequest]:
    """One AcceptRequest per non-blank line; raises BadLine for the first that cannot be one."""
    out = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadLine(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise BadLine(f"line {number}: not a JSON object")
        out.append(_request(number, record, args))
    return out


def _request(number: int, record: dict[str, Any], args: argparse.Namespace) -> inbox_pb2.AcceptRequest:
    namespace = record.get("namespace") if args.payload_field in record else None
    namespace = namespace or args.namespace
    if not namespace:
        raise BadLine(f"line {number}: no namespace: the line names none, and --namespace is not given")
    key, kind = _field(record, args.key_field), _field(record, args.type_field)
    for name, value in ((args.key_field, key), (args.type_field, kind)):
        if not isinstance(value, str | int) or isinstance(value, bool) or value == "":
            raise BadLine(f"line {number}: {name!r} is missing or not a string")
    payload = record.get(args.payload_field, record) if args.payload_field in record else record
    body = payload.encode() if isinstance(payload, str) else json.dumps(payload, separators=(",", ":")).encode()
    metadata = record.get("metadata", {}) if args.payload_field in record else {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise BadLine(f"line {number}: 'metadata' must be an object of strings")
    return inbox_pb2.AcceptRequest(
        namespace=str(namespace),
        event_key=str(key),
        event_type=str(kind),
        payload=body,
        metadata=metadata,
        content_type=str(record.get("content_type", "")) if args.payload_field in record else "",
    )


def _field(record: dict[str, Any], path: str) -> object:
    value: object = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def run_accept(client: Any, args: argparse.Namespace) -> int:
    """Reads, checks, then sends in AcceptBatch calls of 100; prints each line's outcome (0: all durably accepted)."""
    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    try:
        requests = requests_from(source, args)
    except BadLine as exc:
        print(f"inboxd accept: {exc}; nothing sent", file=sys.stderr)
        return 2
    finally:
        if source is not sys.stdin:
            source.close()
    if args.dry_run:
        for r in requests:
            print(f"would send  {r.namespace}  {r.event_key}  {r.event_type}  {len(r.payload)} bytes")
        print(f"dry run: {len(requests)} events checked; nothing sent", file=sys.stderr)
        return 0
    stub = inbox_pb2_grpc.InboxServiceStub(client.channel)  # type: ignore[no-untyped-call]
    counts: Counter[str] = Counter()
    for start in range(0, len(requests), BATCH):
        chunk = requests[start : start + BATCH]
        answer = stub.AcceptBatch(
            inbox_pb2.AcceptBatchRequest(events=chunk), timeout=client.timeout, metadata=client.metadata
        )
        for request, result in zip(chunk, answer.results, strict=True):
            outcome = _OUTCOMES.get(result.outcome, "unknown")
            counts[outcome] += 1
            print(f"{outcome:<9}  {request.namespace}  {request.event_key}")
    said = ", ".join(f"{counts[o]} {o}" for o in ("accepted", "duplicate", "conflict") if counts[o])
    print(f"{len(requests)} events sent: {said or 'none'}", file=sys.stderr)
    return 0
