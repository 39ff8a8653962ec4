"""The operator's acting subcommands of `inboxd`: settle, end-claim, discard.

Each names what the operator saw (`inboxd show` prints it: an action's STATE
and FENCING, a live claim's FENCING, the event's state), so the server refuses
the act once the event moved on (FAILED_PRECONDITION) instead of acting on a
view that is no longer true. Registered beside the reading ones by
`admin_cli`, with the same connection options.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Protocol

from inboxd.serving import admin_output as out
from inboxd_client.v1 import admin_pb2, types_pb2

COMMANDS = ("settle", "end-claim", "discard")
OUTCOMES = {"succeeded": types_pb2.ACTION_STATE_SUCCEEDED, "failed": types_pb2.ACTION_STATE_FAILED}
SETTLEABLE = {"unknown": types_pb2.ACTION_STATE_UNKNOWN, "intended": types_pb2.ACTION_STATE_INTENDED}
DISCARDABLE = {"pending": types_pb2.EVENT_STATE_PENDING, "dead_lettered": types_pb2.EVENT_STATE_DEAD_LETTERED}


class AdminCalls(Protocol):
    """The admin CLI's stub, with the caller's token and deadline on every call."""

    def call(self, method: str, request: Any) -> Any: ...


def add_operator_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Registers settle, end-claim and discard on `inboxd`'s subparsers, with the shared options `common`."""
    settle = commands.add_parser(
        "settle", parents=[common], help="record the outcome you found downstream for an UNKNOWN or abandoned action"
    )
    settle.add_argument("namespace")
    settle.add_argument("event_key")
    settle.add_argument("action", help="the action's name, as `inboxd show` lists it")
    settle.add_argument("--outcome", choices=sorted(OUTCOMES), required=True)
    settle.add_argument("--external-ref", default="", help="the downstream's reference for the effect")
    settle.add_argument("--detail", default="", help="what you found (default: who settled it, and why)")
    settle.add_argument("--expected-state", choices=sorted(SETTLEABLE), required=True, help="the STATE you saw")
    settle.add_argument("--expected-fencing-token", type=int, required=True, help="the action's FENCING you saw")
    settle.add_argument("--reason", required=True, help="why: written to the event's audit trail")

    end = commands.add_parser("end-claim", parents=[common], help="end a dead worker's claim now: PENDING at once")
    end.add_argument("namespace")
    end.add_argument("event_key")
    end.add_argument("--expected-fencing-token", type=int, required=True, help="the live claim's FENCING you saw")
    end.add_argument(
        "--count-attempt", action="store_true", help="count the ended claim as an attempt (default: give it back)"
    )
    end.add_argument("--reason", required=True, help="why: written to the audit trail and the event's last error")

    discard = commands.add_parser(
        "discard", parents=[common], help="complete a PENDING or DEAD_LETTERED event as IGNORED; it stays, with history"
    )
    discard.add_argument("namespace")
    discard.add_argument("event_key")
    discard.add_argument("--expected-state", choices=sorted(DISCARDABLE), required=True, help="the state you saw")
    discard.add_argument("--reason", required=True, help="why: the IGNORED disposition's reason, and the audit's")


def _print(args: argparse.Namespace, event: admin_pb2.Event, line: str) -> int:
    print(json.dumps(out.as_json(event), indent=2, ensure_ascii=False) if args.json else line)
    return 0


def _settle(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.SettleActionRequest(
        namespace=args.namespace,
        event_key=args.event_key,
        action=args.action,
        outcome=OUTCOMES[args.outcome],
        external_ref=args.external_ref,
        detail=args.detail,
        reason=args.reason,
        expected_state=SETTLEABLE[args.expected_state],
        expected_fencing_token=args.expected_fencing_token,
    )
    event = client.call("SettleAction", request).event
    [action] = [a for a in event.actions if a.action == args.action]
    ref = f" (external ref {action.external_ref})" if action.external_ref else ""
    return _print(args, event, f"settled {args.action} of {args.event_key}: {out.action_state_name(action.state)}{ref}")


def _end_claim(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.EndClaimRequest(
        namespace=args.namespace,
        event_key=args.event_key,
        expected_fencing_token=args.expected_fencing_token,
        count_attempt=args.count_attempt,
        reason=args.reason,
    )
    event = client.call("EndClaim", request).event
    s = event.summary
    line = (
        f"ended claim {args.expected_fencing_token} of {args.event_key}: {out.state_name(s.state)}, attempt {s.attempt}"
    )
    return _print(args, event, line)


def _discard(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.DiscardRequest(
        namespace=args.namespace,
        event_key=args.event_key,
        expected_state=DISCARDABLE[args.expected_state],
        reason=args.reason,
    )
    event = client.call("Discard", request).event
    return _print(args, event, f"discarded {args.event_key}: {out.state_name(event.summary.state)}, IGNORED")


RUNNERS = {"settle": _settle, "end-claim": _end_claim, "discard": _discard}
