"""`inboxd subscriptions`: create, list, get and delete subscriptions (fan-out at accept).

Registered beside the other admin subcommands by `admin_cli`, with the same
connection options; each talks to a running server (CreateSubscription,
ListSubscriptions, GetSubscription, DeleteSubscription). A refused call
prints the server's words and exits 1.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from inboxd.domain.subscriptions import copy_namespace
from inboxd.serving import admin_output as out
from inboxd.serving.operator_cli import AdminCalls
from inboxd_client.v1 import admin_pb2


def add_subscription_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Registers `inboxd subscriptions create|list|get|delete` with the shared options `common` on each."""
    subs = commands.add_parser("subscriptions", help="fan-out: copy accepted events to subscribers' namespaces")
    actions = subs.add_subparsers(dest="subscriptions_command", required=True, metavar="{create,list,get,delete}")

    create = actions.add_parser(
        "create", parents=[common], help="copy every new event of matching namespaces to NAME/<namespace>"
    )
    create.add_argument("name", help="the subscriber: its copies go to NAME/<origin namespace>")
    create.add_argument("--namespaces", required=True, help='a namespace or a pattern ("stripe/*")')
    create.add_argument(
        "--event-type", action="append", dest="event_types", default=[], help="copy only this type (repeatable)"
    )
    create.add_argument("--reason", required=True, help="why: written to the subscription's audit trail")

    actions.add_parser("list", parents=[common], help="every subscription within your grants")
    get = actions.add_parser("get", parents=[common], help="one subscription and its audited changes")
    get.add_argument("name")
    delete = actions.add_parser("delete", parents=[common], help="stop copying; the copies made stay")
    delete.add_argument("name")
    delete.add_argument("--reason", required=True, help="why: written to the subscription's audit trail")


def _words(subscription: admin_pb2.Subscription) -> str:
    types = ", ".join(subscription.event_types) or "every type"
    return (
        f"{subscription.name}: {subscription.namespace_pattern} ({types})"
        f" -> {copy_namespace(subscription.name, '<namespace>')}"
    )


def _print(args: argparse.Namespace, answer: Any, text: str) -> int:
    print(json.dumps(out.as_json(answer), indent=2) if args.json else text)
    return 0


def _create(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.CreateSubscriptionRequest(
        name=args.name, namespace_pattern=args.namespaces, event_types=args.event_types, reason=args.reason
    )
    answer = client.call("CreateSubscription", request)
    verb = "created" if answer.created else "already stands"
    return _print(args, answer, f"{verb} {_words(answer.subscription)}")


def _list(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("ListSubscriptions", admin_pb2.ListSubscriptionsRequest())
    rows = [
        [
            s.name,
            s.namespace_pattern,
            ", ".join(s.event_types) or "*",
            copy_namespace(s.name, "<namespace>"),
            f"{out.when(s.created_at)} {s.created_by}",
        ]
        for s in answer.subscriptions
    ]
    text = out.table(["NAME", "NAMESPACES", "TYPES", "COPIES TO", "CREATED"], rows) if rows else "no subscriptions"
    return _print(args, answer, text)


def _get(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("GetSubscription", admin_pb2.GetSubscriptionRequest(name=args.name))
    s = answer.subscription
    lines = [
        f"name          {s.name}",
        f"namespaces    {s.namespace_pattern}",
        f"types         {', '.join(s.event_types) or 'every type'}",
        f"copies to     {copy_namespace(s.name, '<namespace>')}",
        f"created       {out.when(s.created_at)} by {s.created_by}",
    ]
    if answer.changes:
        lines += ["", "changes (newest first)"]
        rows = [[out.when(c.changed_at), c.actor, c.before, c.after, c.reason] for c in answer.changes]
        lines.append(out.table(["WHEN", "ACTOR", "BEFORE", "AFTER", "REASON"], rows))
    return _print(args, answer, "\n".join(lines))


def _delete(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.DeleteSubscriptionRequest(name=args.name, reason=args.reason)
    answer = client.call("DeleteSubscription", request)
    return _print(args, answer, f"deleted {_words(answer.subscription)} (its copies stay)")


_ACTIONS = {"create": _create, "list": _list, "get": _get, "delete": _delete}


def run_subscriptions(client: AdminCalls, args: argparse.Namespace) -> int:
    return _ACTIONS[args.subscriptions_command](client, args)
