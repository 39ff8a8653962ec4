"""`inboxd bulk`: replay or ignore events by filter, at a pace, and follow, list, show or cancel operations.

Registered beside the other admin subcommands by `admin_cli`, with the same
connection options. `bulk replay` and `bulk ignore` start an operation
(StartBulkOperation) and follow it with a progress bar (GetBulkOperation,
twice a second) until it ends; Ctrl-C stops following, never the operation,
and says how to cancel it. `--dry-run` counts and previews the matches and
changes nothing; `--no-wait` prints the operation's id and returns.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from inboxd.serving import admin_output as out
from inboxd.serving.flow_cli import span
from inboxd.serving.operator_cli import AdminCalls
from inboxd_client.v1 import admin_pb2, types_pb2

STATES = {
    "pending": types_pb2.EVENT_STATE_PENDING,
    "completed": types_pb2.EVENT_STATE_COMPLETED,
    "dead_lettered": types_pb2.EVENT_STATE_DEAD_LETTERED,
}
ACTIONS = {
    "replay": admin_pb2.BULK_ACTION_REPLAY,
    "ignore": admin_pb2.BULK_ACTION_IGNORE,
    "copy": admin_pb2.BULK_ACTION_COPY,
}
RUNNING = admin_pb2.BULK_OPERATION_STATE_RUNNING
DONE = admin_pb2.BULK_OPERATION_STATE_DONE
FOLLOW_SECONDS = 0.5


def _instant(text: str) -> datetime:
    """An instant as ISO 8601 (UTC unless it says otherwise), or a period ago: 90m, 2h."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            return datetime.now(UTC) - span(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is neither an ISO 8601 instant nor a period (90m, 2h)"
            ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def add_bulk_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Registers `inboxd bulk replay|ignore|list|show|cancel` with the shared options `common` on each."""
    bulk = commands.add_parser("bulk", help="replay or ignore every event a filter matches, at a pace; follow it")
    actions = bulk.add_subparsers(dest="bulk_command", required=True, metavar="{replay,ignore,copy,list,show,cancel}")

    start = argparse.ArgumentParser(add_help=False)
    start.add_argument("--namespace", "-n", required=True, help='a namespace or a pattern ("mailera/*")')
    start.add_argument(
        "--state", action="append", choices=sorted(STATES), dest="states", help="repeatable (default: dead_lettered)"
    )
    start.add_argument("--type", action="append", dest="types", default=[], help="an event type (repeatable)")
    start.add_argument("--error-contains", default="", help="a substring of the last error (case-sensitive)")
    start.add_argument("--since", type=_instant, help="accepted at or after: ISO 8601, or a period ago (2h)")
    start.add_argument("--until", type=_instant, help="accepted before: ISO 8601, or a period ago (30m)")
    start.add_argument("--ordering-key", default="", help="only events of this ordering key")
    start.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="events changed per second at most: 0 (no pace), or 0.1 up to 10000",
    )
    start.add_argument("--dry-run", action="store_true", help="count and preview the matches, change nothing")
    start.add_argument("--no-wait", action="store_true", help="print the operation's id and return")
    actions.add_parser(
        "replay", parents=[common, start], help="return matching COMPLETED or DEAD_LETTERED events to PENDING"
    ).add_argument("--reason", required=True, help="why: written to each event's audit row")
    actions.add_parser(
        "ignore", parents=[common, start], help="complete matching PENDING or DEAD_LETTERED events as IGNORED"
    ).add_argument("--reason", required=True, help="why: the IGNORED disposition's reason, and the audit's")
    copy = actions.add_parser(
        "copy", parents=[common, start], help="make a subscription's copies of matching events (any state by default)"
    )
    copy.add_argument("--subscription", required=True, help="the subscription whose copies to make")
    copy.add_argument("--reason", required=True, help="why: written to the operation's audit")

    listing = actions.add_parser("list", parents=[common], help="operations, newest first")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (1..100, default 20)")
    show = actions.add_parser("show", parents=[common], help="one operation: its filter, state and counts")
    show.add_argument("id")
    cancel = actions.add_parser("cancel", parents=[common], help="stop a RUNNING operation between two chunks")
    cancel.add_argument("id")
    cancel.add_argument("--reason", required=True, help="why: written to the operation's audit")


def _timestamp(moment: datetime | None) -> Timestamp | None:
    if moment is None:
        return None
    ts = Timestamp()
    ts.FromDatetime(moment)
    return ts


def _start_request(args: argparse.Namespace) -> admin_pb2.StartBulkOperationRequest:
    request = admin_pb2.StartBulkOperationRequest(
        filter=admin_pb2.BulkFilter(
            namespace_pattern=args.namespace,
            event_types=args.types,
            states=[STATES[s] for s in args.states or ()],
            error_contains=args.error_contains,
            ordering_key=args.ordering_key,
        ),
        action=ACTIONS[args.bulk_command],
        reason=args.reason,
        rate=args.rate,
        dry_run=args.dry_run,
        subscription=getattr(args, "subscription", ""),
    )
    if (since := _timestamp(args.since)) is not None:
        request.filter.accepted_from.CopyFrom(since)
    if (until := _timestamp(args.until)) is not None:
        request.filter.accepted_until.CopyFrom(until)
    return request


def state_name(value: int) -> str:
    return admin_pb2.BulkOperationState.Name(value).removeprefix("BULK_OPERATION_STATE_")


def action_name(value: int) -> str:
    return admin_pb2.BulkAction.Name(value).removeprefix("BULK_ACTION_")


def _rate(op: admin_pb2.BulkOperation) -> str:
    return f"{op.measured_rate:.1f}/s" + (f" (at most {op.rate:g}/s)" if op.rate else "")


def summary_line(op: admin_pb2.BulkOperation) -> str:
    """Where an operation stands, in one line."""
    line = f"{state_name(op.state)}: {op.done}/{op.matched} changed, {op.skipped} skipped, {_rate(op)}"
    if op.error:
        line += f"; error: {op.error}"
    return line


def operation_text(op: admin_pb2.BulkOperation) -> str:
    f = op.filter
    states = ", ".join(out.state_name(s) for s in f.states)
    lines = [
        f"id            {op.id}",
        f"action        {action_name(op.action)}{' (dry run)' if op.dry_run else ''}"
        + (f" for subscription {op.subscription}" if op.subscription else ""),
        f"state         {state_name(op.state)}",
        f"namespace     {f.namespace_pattern}",
        f"states        {states}",
    ]
    if f.event_types:
        lines.append(f"types         {', '.join(f.event_types)}")
    if f.error_contains:
        lines.append(f"error has     {f.error_contains!r}")
    if f.ordering_key:
        lines.append(f"ordering key  {f.ordering_key}")
    if f.HasField("accepted_from") or f.HasField("accepted_until"):
        lines.append(f"accepted      from {out.when(f.accepted_from)} until {out.when(f.accepted_until)}")
    lines += [
        f"matched       {op.matched}",
        f"done          {op.done}",
        f"skipped       {op.skipped} (moved on since they matched)",
        f"rate          {_rate(op)}",
        f"reason        {op.reason}",
        f"started       {out.when(op.started_at)} by {op.actor}",
        f"finished      {out.when(op.finished_at)}",
    ]
    if op.cancelled_by:
        lines.append(f"cancelled by  {op.cancelled_by}")
    if op.error:
        lines.append(f"error         {op.error}")
    return "\n".join(lines)


def _follow(client: AdminCalls, op: admin_pb2.BulkOperation, args: argparse.Namespace) -> admin_pb2.BulkOperation:
    """Polls the operation until it ends, drawing its progress (on a terminal, live; elsewhere, at the end)."""
    # Imported here: every other subcommand of `inboxd` starts without it.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=False, highlight=False)
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TextColumn("skipped {task.fields[skipped]}  {task.fields[rate]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(args.bulk_command, total=op.matched or 1, skipped=0, rate="")
        while True:
            progress.update(task, completed=op.done + op.skipped, skipped=op.skipped, rate=_rate(op))
            if op.state != RUNNING:
                progress.update(task, description=f"{args.bulk_command} {state_name(op.state)}")
                return op
            time.sleep(args.follow_seconds)
            op = client.call("GetBulkOperation", admin_pb2.GetBulkOperationRequest(id=op.id)).operation


def _start(client: AdminCalls, args: argparse.Namespace) -> int:
    answer = client.call("StartBulkOperation", _start_request(args))
    op = answer.operation
    if args.json and (args.dry_run or args.no_wait):
        print(json.dumps(out.as_json(answer), indent=2))
        return 0
    if args.dry_run:
        print(f"dry run: {op.matched} events match; nothing changed")
        if answer.first_matches:
            print(f"the first {len(answer.first_matches)}, oldest accepted first:")
            print(out.events_table(answer.first_matches))
        return 0
    if args.no_wait:
        print(op.id)
        return 0
    if not args.json:
        print(f"operation {op.id}: {op.matched} events match", flush=True)
    try:
        op = _follow(client, op, args) if not args.json else _wait(client, op, args)
    except KeyboardInterrupt:
        print(
            f"\nstopped following; operation {op.id} keeps running. Cancel it with:\n"
            f"  inboxd bulk cancel {op.id} --reason '...'",
            file=sys.stderr,
        )
        return 130
    print(json.dumps(out.as_json(op), indent=2) if args.json else summary_line(op))
    return 0 if op.state == DONE else 1


def _wait(client: AdminCalls, op: admin_pb2.BulkOperation, args: argparse.Namespace) -> admin_pb2.BulkOperation:
    while op.state == RUNNING:
        time.sleep(args.follow_seconds)
        op = client.call("GetBulkOperation", admin_pb2.GetBulkOperationRequest(id=op.id)).operation
    return op


def _list(client: AdminCalls, args: argparse.Namespace) -> int:
    ops = list(client.call("ListBulkOperations", admin_pb2.ListBulkOperationsRequest(page_size=args.limit)).operations)
    if args.json:
        print(json.dumps({"operations": [out.as_json(o) for o in ops]}, indent=2))
        return 0
    rows = [
        [
            o.id, action_name(o.action) + (" (dry run)" if o.dry_run else ""), state_name(o.state),
            o.filter.namespace_pattern, f"{o.done}/{o.matched}", str(o.skipped), _rate(o), out.when(o.started_at),
            o.actor,
        ]
        for o in ops
    ]  # fmt: skip
    headers = ["ID", "ACTION", "STATE", "NAMESPACE", "DONE/MATCHED", "SKIPPED", "RATE", "STARTED", "ACTOR"]
    print(out.table(headers, rows) if rows else "no bulk operations")
    return 0


def _show(client: AdminCalls, args: argparse.Namespace) -> int:
    op = client.call("GetBulkOperation", admin_pb2.GetBulkOperationRequest(id=args.id)).operation
    print(json.dumps(out.as_json(op), indent=2) if args.json else operation_text(op))
    return 0


def _cancel(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.CancelBulkOperationRequest(id=args.id, reason=args.reason)
    op = client.call("CancelBulkOperation", request).operation
    print(json.dumps(out.as_json(op), indent=2) if args.json else summary_line(op))
    return 0


_ACTIONS = {"replay": _start, "ignore": _start, "copy": _start, "list": _list, "show": _show, "cancel": _cancel}


def run_bulk(client: AdminCalls, args: argparse.Namespace) -> int:
    args.follow_seconds = getattr(args, "follow_seconds", FOLLOW_SECONDS)
    return _ACTIONS[args.bulk_command](client, args)
