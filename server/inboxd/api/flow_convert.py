"""Protobuf <-> flow control's domain values (SetFlowControl, GetFlowControl, ListFlowControls).

SetFlowControlRequest's proto3 `optional` fields say what the operator
changes: a field absent keeps the rule's value, one present changes it
(0 removes a limit). The domain value checks its own fields.
"""

from __future__ import annotations

from inboxd.api.convert import duration_from_proto, duration_to_proto, instant_to_proto
from inboxd.domain.flow_rules import FlowChange, FlowChangeRecord, FlowControl, FlowRule, NamespaceFlow, RuleChanged
from inboxd_client.v1 import admin_pb2


def flow_change(request: admin_pb2.SetFlowControlRequest) -> FlowChange:
    def given(field: str) -> bool:
        return request.HasField(field)

    return FlowChange(
        pattern=request.pattern,
        reason=request.reason,
        max_in_flight=request.max_in_flight if given("max_in_flight") else None,
        rate=request.rate if given("rate") else None,
        burst=request.burst if given("burst") else None,
        paused=request.paused if given("paused") else None,
        weight=request.weight if given("weight") else None,
        resume_ramp=duration_from_proto("resume_ramp", request.resume_ramp) if given("resume_ramp") else None,
        ramp_rate=request.ramp_rate,
        remove=request.remove,
    )


def rule_to_proto(rule: FlowRule) -> admin_pb2.FlowRule:
    out = admin_pb2.FlowRule(
        pattern=rule.pattern,
        max_in_flight=rule.max_in_flight or 0,
        rate=rule.rate or 0.0,
        burst=rule.burst or 0,
        paused=rule.paused,
        weight=rule.weight,
        ramp_rate=rule.ramp_rate or 0.0,
        updated_by=rule.updated_by,
    )
    if rule.resumed_at is not None:
        out.resumed_at.CopyFrom(instant_to_proto(rule.resumed_at))
    if rule.ramp is not None:
        out.ramp.CopyFrom(duration_to_proto(rule.ramp))
    if rule.updated_at is not None:
        out.updated_at.CopyFrom(instant_to_proto(rule.updated_at))
    return out


def set_response(changed: RuleChanged) -> admin_pb2.SetFlowControlResponse:
    out = admin_pb2.SetFlowControlResponse()
    if changed.before is not None:
        out.before.CopyFrom(rule_to_proto(changed.before))
    if changed.after is not None:
        out.after.CopyFrom(rule_to_proto(changed.after))
    return out


def control_to_proto(control: FlowControl) -> admin_pb2.FlowControl:
    figures = control.figures
    return admin_pb2.FlowControl(
        rule=rule_to_proto(control.rule),
        namespaces=figures.namespaces,
        in_flight=figures.in_flight,
        pending=figures.pending,
        throttled_claims=control.throttled_claims,
    )


def _change_to_proto(change: FlowChangeRecord) -> admin_pb2.FlowControlChange:
    return admin_pb2.FlowControlChange(
        pattern=change.pattern,
        actor=change.actor,
        reason=change.reason,
        changed_at=instant_to_proto(change.changed_at),
        before=change.before,
        after=change.after,
    )


def get_response(flow: NamespaceFlow) -> admin_pb2.GetFlowControlResponse:
    out = admin_pb2.GetFlowControlResponse(
        changes=[_change_to_proto(c) for c in flow.changes],
        in_flight=flow.figures.in_flight,
        pending=flow.figures.pending,
    )
    if flow.control is not None:
        out.control.CopyFrom(control_to_proto(flow.control))
    return out
