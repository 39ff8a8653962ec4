"""The operator's subcommands of `inboxd`: stats, events, show, replay, dead-letters (others in their modules).

They talk to a running server over gRPC (InboxAdminService), so they work
against any replica, with the same tokens and TLS as every other client.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from inboxd.domain.payload_display import is_json_content_type
from inboxd.domain.unprintable import escape_unprintable
from inboxd.serving import accept_cli, bulk_cli, destinations_cli, flow_cli, operator_cli, subscriptions_cli
from inboxd.serving import admin_output as out
from inboxd_client.plaintext import PlaintextTokenRefused, refuse_plaintext_token, trusted_network_from
from inboxd_client.v1 import admin_pb2, admin_pb2_grpc, types_pb2

COMMANDS = (
    "stats", "events", "show", "replay", "dead-letters", "flow", "bulk", "subscriptions", "destinations",
    *operator_cli.COMMANDS, *accept_cli.COMMANDS,
)  # fmt: skip
DEFAULT_TARGET = "127.0.0.1:50051"
STATES = {
    "pending": types_pb2.EVENT_STATE_PENDING,
    "processing": types_pb2.EVENT_STATE_PROCESSING,
    "completed": types_pb2.EVENT_STATE_COMPLETED,
    "dead_lettered": types_pb2.EVENT_STATE_DEAD_LETTERED,
}
MAX_PAGE = 1000


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def add_admin_commands(commands: Any) -> None:
    """Registers the subcommands on `inboxd`'s subparsers (argparse's private action type, hence Any)."""
    common = argparse.ArgumentParser(add_help=False)
    conn = common.add_argument_group("connection")
    conn.add_argument(
        "--target",
        default=os.environ.get("INBOXD_TARGET") or DEFAULT_TARGET,
        help=f"host:port (INBOXD_TARGET; default {DEFAULT_TARGET})",
    )
    conn.add_argument("--token", default=os.environ.get("INBOXD_TOKEN"), help="bearer token (INBOXD_TOKEN)")
    conn.add_argument(
        "--tls-ca", default=os.environ.get("INBOXD_TLS_CA"), help="CA certificate file: use TLS (INBOXD_TLS_CA)"
    )
    conn.add_argument("--tls", action="store_true", help="use TLS with the system's root certificates")
    conn.add_argument(
        "--trusted-network",
        action="store_true",
        default=trusted_network_from(os.environ),
        help="allow the token in plaintext beyond loopback (INBOXD_TRUSTED_NETWORK): TLS ends at a proxy you trust",
    )
    conn.add_argument("--timeout", type=float, default=30.0, help="seconds per call (default 30)")
    common.add_argument("--json", action="store_true", help="JSON instead of a table")

    stats = commands.add_parser("stats", parents=[common], help="per namespace: states, oldest claimable, unresolved")
    stats.add_argument("--namespace", "-n", default="", help="one namespace (default: all)")

    events = commands.add_parser("events", parents=[common], help="list events, newest first, without payloads")
    events.add_argument("--namespace", "-n", default="", help="one namespace (default: all)")
    events.add_argument("--state", choices=sorted(STATES), help="only events in this state")
    events.add_argument("--limit", type=_positive, default=100, help="at most this many (default 100)")
    events.add_argument("--page-token", default="", help="continue where a previous listing stopped")

    dead = commands.add_parser("dead-letters", parents=[common], help="list DEAD_LETTERED events with their last error")
    dead.add_argument("--namespace", "-n", default="", help="one namespace (default: all)")
    dead.add_argument("--limit", type=_positive, default=100, help="at most this many (default 100)")

    show = commands.add_parser("show", parents=[common], help="one event's whole record")
    show.add_argument("namespace")
    show.add_argument("event_key")
    show.add_argument(
        "--conflict-payloads", action="store_true", help="the conflicting copies' payloads too (else size and digest)"
    )
    show.add_argument(
        "--raw", action="store_true", help="only the payload's exact bytes on stdout (to re-verify a signature)"
    )

    replay = commands.add_parser("replay", parents=[common], help="return COMPLETED or DEAD_LETTERED events to PENDING")
    replay.add_argument("--namespace", "-n", required=True)
    which = replay.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", action="append", dest="keys", help="an event key (repeatable)")
    which.add_argument("--dead-letters", action="store_true", help="every dead letter of the namespace")
    replay.add_argument("--reason", required=True, help="why: written to each event's audit trail")
    replay.add_argument("--dry-run", action="store_true", help="list what would be replayed, change nothing")

    operator_cli.add_operator_commands(commands, common)
    flow_cli.add_flow_commands(commands, common)
    bulk_cli.add_bulk_commands(commands, common)
    accept_cli.add_accept_command(commands, common)
    subscriptions_cli.add_subscription_commands(commands, common)

    destinations_cli.add_destinations_commands(commands, common)


def run_admin_command(args: argparse.Namespace) -> int:
    """Runs one admin subcommand; returns the exit status (1 when a call failed)."""
    try:
        refuse_plaintext_token(
            args.target, token=args.token, tls=bool(args.tls_ca or args.tls), trusted_network=args.trusted_network
        )
    except PlaintextTokenRefused as exc:
        print(f"inboxd {args.command}: {exc}", file=sys.stderr)
        return 2
    try:
        with _channel(args) as channel:
            client = _Client(admin_pb2_grpc.InboxAdminServiceStub(channel), args, channel)  # type: ignore[no-untyped-call]
            return _RUNNERS[args.command](client, args)
    except grpc.RpcError as exc:
        print(f"inboxd {args.command}: {_describe(exc)}{_connection_hint(exc, args)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"inboxd {args.command}: {exc}", file=sys.stderr)
        return 2


def _channel(args: argparse.Namespace) -> grpc.Channel:
    if args.tls_ca or args.tls:
        ca = Path(args.tls_ca).read_bytes() if args.tls_ca else None
        return grpc.secure_channel(args.target, grpc.ssl_channel_credentials(root_certificates=ca))
    return grpc.insecure_channel(args.target)


def _describe(exc: grpc.RpcError) -> str:
    code, details = exc.code(), exc.details()
    return f"{code.name}: {details}"


def _connection_hint(exc: grpc.RpcError, args: argparse.Namespace) -> str:
    """What to try when the call never reached inboxd: a plaintext client against TLS reads only "Socket closed"."""
    if exc.code() != grpc.StatusCode.UNAVAILABLE:
        return ""
    if args.tls_ca or args.tls:
        return (
            f"\n  (TLS was used: if {args.target} serves plaintext, drop --tls/--tls-ca; if its certificate is not"
            " signed by the CA given, pass the right one with --tls-ca FILE or INBOXD_TLS_CA)"
        )
    return (
        f"\n  (no TLS was used: if inboxd at {args.target} serves TLS, pass --tls-ca FILE or set INBOXD_TLS_CA,"
        " or --tls for a certificate the system trusts; else check the address: --target or INBOXD_TARGET)"
    )


class _Client:
    """The stub with the caller's token and deadline on every call."""

    def __init__(
        self, stub: admin_pb2_grpc.InboxAdminServiceStub, args: argparse.Namespace, channel: grpc.Channel
    ) -> None:
        self.stub = stub
        # For the commands that call InboxService (accept).
        self.channel = channel
        self.timeout: float = args.timeout
        self.metadata = [("authorization", f"Bearer {args.token}")] if args.token else []

    def call(self, method: str, request: Any) -> Any:
        return getattr(self.stub, method)(request, timeout=self.timeout, metadata=self.metadata)

    def summaries(
        self, namespace: str, state: types_pb2.EventState, limit: int, page_token: str = ""
    ) -> tuple[list[admin_pb2.EventSummary], str]:
        """Up to `limit` summaries across pages, and the token that resumes after them ("" at the end)."""
        found: list[admin_pb2.EventSummary] = []
        while len(found) < limit:
            request = admin_pb2.ListEventsRequest(
                namespace=namespace, state=state, page_size=min(limit - len(found), MAX_PAGE), page_token=page_token
            )
            page = self.call("ListEvents", request)
            found.extend(page.events)
            page_token = page.next_page_token
            if not page_token:
                break
        return found, page_token


def _stats(client: _Client, args: argparse.Namespace) -> int:
    response = client.call("Stats", admin_pb2.StatsRequest(namespace=args.namespace))
    print(json.dumps(out.as_json(response), indent=2) if args.json else out.stats_table(response))
    return 0


def _events(client: _Client, args: argparse.Namespace) -> int:
    state = STATES[args.state] if args.state else types_pb2.EVENT_STATE_UNSPECIFIED
    return _listing(client, args, state, out.events_table, args.page_token)


def _dead_letters(client: _Client, args: argparse.Namespace) -> int:
    return _listing(client, args, types_pb2.EVENT_STATE_DEAD_LETTERED, out.dead_letters_table, "")


def _listing(
    client: _Client, args: argparse.Namespace, state: types_pb2.EventState, render: Any, page_token: str
) -> int:
    events, resume = client.summaries(args.namespace, state, args.limit, page_token)
    if args.json:
        print(json.dumps({"events": [out.as_json(e) for e in events], "next_page_token": resume}, indent=2))
    else:
        print(render(events))
        if resume:
            print(f"(more: add --page-token {resume})" if args.command == "events" else "(more: raise --limit)")
    return 0


def _show(client: _Client, args: argparse.Namespace) -> int:
    if args.raw and (args.json or args.conflict_payloads):
        print("inboxd show: --raw writes the payload alone: not with --json or --conflict-payloads", file=sys.stderr)
        return 2
    request = admin_pb2.GetEventRequest(
        namespace=args.namespace, event_key=args.event_key, include_conflict_payloads=args.conflict_payloads
    )
    event = client.call("GetEvent", request).event
    if args.raw:
        return _write_raw(event)
    # ensure_ascii=False keeps a person's text readable; DEL, C1 and bidi marks still come out escaped.
    shown = escape_unprintable(json.dumps(out.as_json(event), indent=2, ensure_ascii=False), keep="\n")
    print(shown if args.json else out.event_text(event))
    return 0


def _write_raw(event: admin_pb2.Event) -> int:
    """The payload's bytes exactly as accepted, and nothing else, on stdout: `| openssl dgst ...` verifies them."""
    if not event.payload:
        # A JSON payload is never empty, so an empty one was dropped; another type's may just be empty.
        dropped = is_json_content_type(event.content_type)
        why = "dropped by payload retention" if dropped else "empty (or dropped by payload retention)"
        print(f"inboxd show: the payload of {event.summary.event_key} is {why}; nothing written", file=sys.stderr)
        return 1 if dropped else 0
    sys.stdout.buffer.write(event.payload)
    sys.stdout.buffer.flush()
    return 0


def _replay(client: _Client, args: argparse.Namespace) -> int:
    keys: Sequence[str] = args.keys or [
        e.event_key for e in client.summaries(args.namespace, types_pb2.EVENT_STATE_DEAD_LETTERED, sys.maxsize)[0]
    ]
    if args.dry_run:
        for key in keys:
            print(key)
        print(f"would replay {len(keys)} events of {args.namespace}", file=sys.stderr)
        return 0
    replayed: list[str] = []
    failed: list[dict[str, str]] = []
    for index, key in enumerate(keys, start=1):
        request = admin_pb2.ReplayRequest(namespace=args.namespace, event_key=key, reason=args.reason)
        try:
            client.call("Replay", request)
        except grpc.RpcError as exc:
            failed.append({"event_key": key, "error": _describe(exc)})
            print(f"failed   {index}/{len(keys)} {key}: {_describe(exc)}", file=sys.stderr)
            continue
        replayed.append(key)
        print(f"replayed {index}/{len(keys)} {key}", file=sys.stderr)
    if args.json:
        print(json.dumps({"namespace": args.namespace, "replayed": replayed, "failed": failed}, indent=2))
    else:
        print(f"replayed {len(replayed)} of {len(keys)} events in {args.namespace}; {len(failed)} failed")
    return 1 if failed else 0


_RUNNERS = {
    "stats": _stats,
    "events": _events,
    "dead-letters": _dead_letters,
    "show": _show,
    "replay": _replay,
    "flow": flow_cli.run_flow,
    "bulk": bulk_cli.run_bulk,
    "subscriptions": subscriptions_cli.run_subscriptions,
    "destinations": destinations_cli.run_destinations,
    **operator_cli.RUNNERS,
    "accept": accept_cli.run_accept,
}
