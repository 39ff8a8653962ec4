"""`inboxd flow`: show, set, pause, resume and remove flow-control rules (DESIGN, Flow control).

Registered beside the other admin subcommands by `admin_cli`, with the same
connection options; each talks to a running server (SetFlowControl,
GetFlowControl, ListFlowControls), so a change made against one replica
binds every replica. A refused change prints the server's words and exits 1.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import timedelta
from typing import Any

from google.protobuf.duration_pb2 import Duration

from inboxd.domain.flow_rules import FlowRule, in_words
from inboxd.domain.namespace_patterns import is_glob
from inboxd.serving import admin_output as out
from inboxd.serving.operator_cli import AdminCalls
from inboxd_client.v1 import admin_pb2

_UINT32 = 2**32 - 1
_SPAN = re.compile(r"(\d+(?:\.\d+)?)([smh]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def _count(text: str) -> int:
    """A whole number the request's uint32 can carry; the server judges its range and names the field."""
    value = int(text)
    if not 0 <= value <= _UINT32:
        raise argparse.ArgumentTypeError(f"{value} is not a whole number from 0 to {_UINT32}")
    return value


def span(text: str) -> timedelta:
    """A period as 90, 30s, 5m or 1h."""
    matched = _SPAN.fullmatch(text.strip())
    if matched is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a period: say 30s, 5m or 1h")
    return timedelta(seconds=float(matched.group(1)) * _UNIT_SECONDS[matched.group(2)])


def add_flow_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Registers `inboxd flow show|set|pause|resume|remove` with the shared options `common` on each."""
    flow = commands.add_parser("flow", help="flow-control rules: limits, rates, pause and resume per namespace")
    actions = flow.add_subparsers(dest="flow_command", required=True, metavar="{show,set,pause,resume,remove}")

    show = actions.add_parser(
        "show", parents=[common], help="every rule, or what governs one namespace (live figures, recent changes)"
    )
    show.add_argument("name", nargs="?", default="", metavar="NAMESPACE_OR_PATTERN")

    change = argparse.ArgumentParser(add_help=False)
    change.add_argument("pattern", help='a namespace or a pattern ("mailera/*")')
    change.add_argument("--reason", required=True, help="why: written to the rule's audit trail")

    set_rule = actions.add_parser(
        "set", parents=[common, change], help="create or change a rule; options left out keep their value, 0 removes"
    )
    set_rule.add_argument("--max-in-flight", type=_count, help="at most this many events leased at once (0: no limit)")
    set_rule.add_argument("--rate", type=float, help="events handed out per second (0: no rate limit)")
    set_rule.add_argument("--burst", type=_count, help="the rate's bucket size (0: one second's worth)")
    set_rule.add_argument("--weight", type=_count, help="the share of each turn of fair claiming (0: 1)")

    actions.add_parser("pause", parents=[common, change], help="accept as ever, hand out nothing")
    resume = actions.add_parser("resume", parents=[common, change], help="hand out again, at once or ramping up")
    resume.add_argument("--ramp", type=span, help="ramp the claim rate up from zero over this period (30s, 5m, 1h)")
    resume.add_argument(
        "--ramp-rate",
        type=float,
        default=0.0,
        help="the rate the ramp climbs to (default: --rate's); a rule with no --rate keeps it after the ramp",
    )

    actions.add_parser("remove", parents=[common, change], help="remove the rule: the next most specific one governs")


def _rule(message: admin_pb2.FlowRule) -> FlowRule:
    """The rule as the domain words it (for the audit's words, the same here)."""
    return FlowRule(
        pattern=message.pattern,
        max_in_flight=message.max_in_flight or None,
        rate=message.rate or None,
        burst=message.burst or None,
        paused=message.paused,
        weight=message.weight or 1,
        ramp=message.ramp.ToTimedelta() if message.HasField("ramp") else None,
        ramp_rate=message.ramp_rate or None,
    )


def _words(message: admin_pb2.FlowRule, present: bool) -> str:
    return in_words(_rule(message) if present else None)


def _changed(client: AdminCalls, args: argparse.Namespace, request: admin_pb2.SetFlowControlRequest) -> int:
    answer = client.call("SetFlowControl", request)
    if args.json:
        print(json.dumps(out.as_json(answer), indent=2))
        return 0
    before = _words(answer.before, answer.HasField("before"))
    after = _words(answer.after, answer.HasField("after"))
    print(f"{args.flow_command} {args.pattern}: {before} -> {after}")
    return 0


def _set(client: AdminCalls, args: argparse.Namespace) -> int:
    fields = {
        "max_in_flight": args.max_in_flight,
        "rate": args.rate,
        "burst": args.burst,
        "weight": args.weight,
    }
    given = {name: value for name, value in fields.items() if value is not None}
    return _changed(client, args, admin_pb2.SetFlowControlRequest(pattern=args.pattern, reason=args.reason, **given))


def _pause(client: AdminCalls, args: argparse.Namespace) -> int:
    return _changed(
        client, args, admin_pb2.SetFlowControlRequest(pattern=args.pattern, reason=args.reason, paused=True)
    )


def _resume(client: AdminCalls, args: argparse.Namespace) -> int:
    request = admin_pb2.SetFlowControlRequest(
        pattern=args.pattern, reason=args.reason, paused=False, ramp_rate=args.ramp_rate
    )
    if args.ramp is not None:
        ramp = Duration()
        ramp.FromTimedelta(args.ramp)
        request.resume_ramp.CopyFrom(ramp)
    return _changed(client, args, request)


def _remove(client: AdminCalls, args: argparse.Namespace) -> int:
    return _changed(
        client, args, admin_pb2.SetFlowControlRequest(pattern=args.pattern, reason=args.reason, remove=True)
    )


def _limit(limit: int, in_flight: int, *, each: bool = False) -> str:
    """In flight against max_in_flight; a pattern's limit binds each namespace, its in flight is their sum."""
    if not limit:
        return f"{in_flight}/-"
    return f"{in_flight} ({limit} each)" if each else f"{in_flight}/{limit}"


def _state(rule: admin_pb2.FlowRule) -> str:
    if rule.paused:
        return "paused"
    if rule.HasField("ramp"):
        ends = rule.resumed_at.ToDatetime() + rule.ramp.ToTimedelta()
        return f"ramping to {rule.ramp_rate:g}/s until {ends:%H:%M:%SZ}"
    return "active"


def controls_table(controls: list[admin_pb2.FlowControl]) -> str:
    """The rules, most specific first, with what each governs now."""
    rows = [
        [
            c.rule.pattern,
            _state(c.rule),
            _limit(c.rule.max_in_flight, c.in_flight, each=is_glob(c.rule.pattern)),
            f"{c.rule.rate:g}/s" if c.rule.rate else "-",
            str(c.rule.burst or "-"),
            str(c.rule.weight),
            str(c.namespaces),
            str(c.pending),
            str(c.throttled_claims),
            f"{out.when(c.rule.updated_at)} {c.rule.updated_by}",
        ]
        for c in controls
    ]
    headers = [
        "PATTERN", "STATE", "IN FLIGHT/MAX", "RATE", "BURST", "WEIGHT", "NAMESPACES", "PENDING", "THROTTLED", "UPDATED",
    ]  # fmt: skip
    return out.table(headers, rows)


def namespace_text(name: str, answer: admin_pb2.GetFlowControlResponse) -> str:
    """What governs one namespace: the rule in words, the live figures, the rule's recent changes."""
    lines = [f"{'pattern' if is_glob(name) else 'namespace':<14}{name}"]
    if not answer.HasField("control"):
        lines.append("rule          none: no limits, weight 1")
        lines.append(f"in flight     {answer.in_flight}")
    else:
        c = answer.control
        lines.append(f"rule          {c.rule.pattern}: {in_words(_rule(c.rule))}")
        lines.append(f"state         {_state(c.rule)}")
        lines.append(f"in flight     {_limit(c.rule.max_in_flight, answer.in_flight, each=is_glob(name))}")
    lines.append(f"pending       {answer.pending}")
    if answer.HasField("control"):
        c = answer.control
        if is_glob(name):
            lines.append(f"governs       {c.namespaces} namespaces with open events")
        lines.append(f"throttled     {c.throttled_claims} claims held back by this server process")
        lines.append(f"updated       {out.when(c.rule.updated_at)} by {c.rule.updated_by}")
    if answer.changes:
        lines += ["", "recent changes (newest first)"]
        rows = [[out.when(ch.changed_at), ch.actor, ch.before, ch.after, ch.reason] for ch in answer.changes]
        lines.append(out.table(["WHEN", "ACTOR", "BEFORE", "AFTER", "REASON"], rows))
    return "\n".join(lines)


def _show(client: AdminCalls, args: argparse.Namespace) -> int:
    if args.name:
        answer = client.call("GetFlowControl", admin_pb2.GetFlowControlRequest(namespace=args.name))
        print(json.dumps(out.as_json(answer), indent=2) if args.json else namespace_text(args.name, answer))
        return 0
    controls = list(client.call("ListFlowControls", admin_pb2.ListFlowControlsRequest()).controls)
    if args.json:
        print(json.dumps({"controls": [out.as_json(c) for c in controls]}, indent=2))
    else:
        print(controls_table(controls) if controls else "no flow-control rules")
    return 0


_ACTIONS = {"show": _show, "set": _set, "pause": _pause, "resume": _resume, "remove": _remove}


def run_flow(client: AdminCalls, args: argparse.Namespace) -> int:
    return _ACTIONS[args.flow_command](client, args)
