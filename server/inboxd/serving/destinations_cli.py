"""`inboxd destinations`: create, list, get, resume and delete destinations (push to HTTP).

Registered beside the other admin subcommands by `admin_cli`, with the same
connection options; each talks to a running server (CreateDestination,
ListDestinations, GetDestination, ResumeDestination, DeleteDestination). A
refused call prints the server's words and exits 1. `create` prints the
signing secret once: the server never shows it again.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration

from inboxd.serving import admin_output as out
from inboxd.serving.flow_cli import span
from inboxd.serving.operator_cli import AdminCalls
from inboxd_client.v1 import admin_pb2

_STATES = {admin_pb2.DESTINATION_STATE_ACTIVE: "active", admin_pb2.DESTINATION_STATE_PAUSED: "paused"}


def _duration(value: timedelta) -> Duration:
    d = Duration()
    d.FromTimedelta(value)
    return d


def add_destinations_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Registers `inboxd destinations create|list|get|resume|delete` with the shared options `common` on each."""
    top = commands.add_parser("destinations", help="HTTP endpoints inboxd POSTs events to, signed (Standard Webhooks)")
    actions = top.add_subparsers(dest="destinations_command", required=True, metavar="{create,list,get,resume,delete}")

    create = actions.add_parser("create", parents=[common], help="create a destination; prints its secret once")
    create.add_argument("name", help="letters, digits, '.', '_' or '-'")
    create.add_argument(
        "--url", required=True, help="https://... (plain http only with INBOXD_DESTINATIONS_ALLOW_HTTP)"
    )
    create.add_argument("--namespaces", required=True, help="the namespace or glob it serves ('stripe/*')")
    create.add_argument("--reason", required=True, help="why: written to the audit trail")
    create.add_argument("--secret", default="", help="whsec_... (default: a new one, printed once)")
    create.add_argument("--post-timeout", type=span, help="one POST's bound (default 10s, 1s..5m)")
    create.add_argument("--max-attempts", type=int, default=0, help="attempts before dead letters (default: server's)")
    create.add_argument("--backoff-base", type=span, help="the first retry's delay, doubling (default: server's)")
    create.add_argument("--backoff-cap", type=span, help="the longest retry delay (default: 1h with --backoff-base)")
    create.add_argument("--concurrency", type=int, default=0, help="POSTs in flight per instance (default 8)")
    create.add_argument(
        "--forward-signature-metadata",
        action="store_true",
        help="send the provider's inboxd.signature.* metadata as inboxd-signature-* headers",
    )

    actions.add_parser("list", parents=[common], help="every destination within your grants")
    get = actions.add_parser("get", parents=[common], help="one destination: breaker, latest attempts")
    get.add_argument("name")
    for verb, words in (("resume", "close an open breaker now"), ("delete", "remove it (its attempts stay)")):
        one = actions.add_parser(verb, parents=[common], help=words)
        one.add_argument("name")
        one.add_argument("--reason", required=True, help="why: written to the audit trail")


def _row(d: admin_pb2.Destination) -> list[str]:
    state = _STATES.get(d.state, "?")
    if d.state == admin_pb2.DESTINATION_STATE_PAUSED:
        state += f" (next try {out.when(d.next_try_at)})"
    return [d.name, d.namespace_pattern, d.url, state, str(d.consecutive_failures)]


def destination_text(d: admin_pb2.Destination, attempts: list[admin_pb2.DeliveryAttempt]) -> str:
    fields = [
        ("name", d.name),
        ("url", d.url),
        ("namespaces", d.namespace_pattern),
        ("state", _STATES.get(d.state, "?")),
        ("paused reason", d.paused_reason),
        ("next try", out.when(d.next_try_at) if d.HasField("next_try_at") else ""),
        ("failures in a row", str(d.consecutive_failures)),
        ("timeout", f"{d.timeout.ToTimedelta().total_seconds():g} s"),
        ("max attempts", str(d.max_attempts or "server's")),
        (
            "backoff",
            f"{d.backoff_base.ToTimedelta()} .. {d.backoff_cap.ToTimedelta()}"
            if d.HasField("backoff_base")
            else "server's",
        ),
        ("concurrency", str(d.concurrency)),
        ("forwards signature metadata", "yes" if d.forward_signature_metadata else "no"),
        ("created", f"{out.when(d.created_at)} by {d.created_by}"),
    ]
    width = max(len(name) for name, _ in fields)
    text = "\n".join(f"{name.ljust(width)}  {out.terminal_safe(value, lines=False) or '-'}" for name, value in fields)
    return text + "\n\nlatest attempts (newest first)\n" + out.deliveries_table(attempts)


def _print(args: argparse.Namespace, message: Any, text: str) -> None:
    print(json.dumps(out.as_json(message), indent=2) if args.json else text)


def _create(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.CreateDestinationRequest(
        name=args.name,
        url=args.url,
        namespace_pattern=args.namespaces,
        reason=args.reason,
        secret=args.secret,
        max_attempts=args.max_attempts,
        concurrency=args.concurrency,
        forward_signature_metadata=args.forward_signature_metadata,
    )
    for field, given in (("timeout", args.post_timeout), ("backoff_base", args.backoff_base),
                         ("backoff_cap", args.backoff_cap)):  # fmt: skip
        if given is not None:
            getattr(request, field).CopyFrom(_duration(given))
    answer = client.call("CreateDestination", request)
    text = destination_text(answer.destination, [])
    _print(args, answer, f"{text}\n\nsecret: {answer.secret}")
    print("the secret is shown once: give it to the endpoint now", file=sys.stderr)
    return 0


def _list(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("ListDestinations", admin_pb2.ListDestinationsRequest())
    rows = [_row(d) for d in answer.destinations]
    headers = ["NAME", "NAMESPACES", "URL", "STATE", "FAILURES"]
    _print(args, answer, out.table(headers, rows) if rows else "no destinations")
    return 0


def _get(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("GetDestination", admin_pb2.GetDestinationRequest(name=args.name))
    _print(args, answer, destination_text(answer.destination, list(answer.recent_attempts)))
    return 0


def _resume(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("ResumeDestination", admin_pb2.ResumeDestinationRequest(name=args.name, reason=args.reason))
    _print(args, answer, f"resumed {args.name}: {_STATES.get(answer.destination.state, '?')}")
    return 0


def _delete(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("DeleteDestination", admin_pb2.DeleteDestinationRequest(name=args.name, reason=args.reason))
    _print(args, answer, f"deleted {args.name}")
    return 0


_ACTIONS = {"create": _create, "list": _list, "get": _get, "resume": _resume, "delete": _delete}


def run_destinations(client: AdminCalls, args: argparse.Namespace) -> int:
    return _ACTIONS[args.destinations_command](client, args)
