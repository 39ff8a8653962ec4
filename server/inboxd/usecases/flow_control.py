"""Flow control for operators: set a rule, read what governs a namespace, list the rules (DESIGN, Flow control).

A base of `usecases.admin.Operators`, as `OperatorActs` is. Each call is
the caller's within its grants: a rule's pattern must lie within the
token's namespaces (a token granted every namespace may set any), and a
listing shows only the rules that do. A change is written with its audit
row in one transaction; once committed, a change that can make events
claimable (a resume, a limit raised or removed, a rule removed, a weight
changed) wakes every waiting Claim and Work stream, here and, through the
replicas' signals, on every other replica: their next look obeys the new rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from inboxd.config.tokens import Caller
from inboxd.domain.errors import NotFound, PermissionDenied
from inboxd.domain.flow_rules import (
    FlowChange,
    FlowControl,
    FlowRule,
    NamespaceFlow,
    RuleChanged,
    check_pattern,
    may_release_events,
)
from inboxd.domain.namespace_patterns import glob_within_any, is_glob
from inboxd.store import flow_rules as store
from inboxd.store.database import Connection

if TYPE_CHECKING:
    from inboxd.usecases.inbox import Inbox


def _require_within_grants(caller: Caller, pattern: str, field: str) -> None:
    if not glob_within_any(pattern, caller.namespaces):
        raise PermissionDenied(
            f"token {caller.name!r} is not granted {field} {pattern!r}: a flow-control rule must lie within"
            f" the token's namespaces ({', '.join(caller.namespaces) or 'none'})"
        )


class FlowControls:
    """SetFlowControl, GetFlowControl and ListFlowControls; the dataclass that inherits this holds the Inbox."""

    inbox: Inbox

    def _throttled(self, rule: FlowRule) -> int:
        # Claims this process held back under the rule: the claim path counts them on the Inbox.
        throttled: Mapping[str, int] = self.inbox.flow_throttled
        return int(throttled.get(rule.pattern, 0))

    async def set_flow_control(self, change: FlowChange, *, caller: Caller) -> RuleChanged:
        """Creates, changes or removes one rule, audited with the caller as actor; answers it before and after."""
        _require_within_grants(caller, change.pattern, "pattern")
        now = self.inbox.clock()
        changed = await self.inbox.db.run(lambda conn: store.set_rule(conn, change, actor=caller.name, now=now))
        if may_release_events(changed.before, changed.after):
            self._wake_everyone()
        return changed

    def _wake_everyone(self) -> None:
        """Every waiting Claim and Work stream looks again, here and on every other replica."""
        self.inbox.bus.notify_all()
        if self.inbox.signals is not None:
            self.inbox.signals.publish_look_again()

    async def get_flow_control(self, name: str, *, caller: Caller) -> NamespaceFlow:
        """The rule governing a namespace (figures of that namespace alone), or a rule by its exact pattern."""
        check_pattern("namespace", name)
        _require_within_grants(caller, name, "namespace")

        async def read(conn: Connection) -> NamespaceFlow:
            if is_glob(name):
                rule = await store.find_rule(conn, name)
                if rule is None:
                    raise NotFound(f"no flow-control rule for pattern {name!r}")
                figures = await store.rule_figures(conn, rule)
            else:
                rule = await store.governing_rule(conn, name)
                figures = await store.namespace_figures(conn, name)
            if rule is None:
                return NamespaceFlow(None, (), figures)
            changes = await store.recent_changes(conn, rule.pattern)
            return NamespaceFlow(FlowControl(rule, figures, self._throttled(rule)), changes, figures)

        return await self.inbox.db.run(read, custom_plans=True)

    async def all_flow_rules(self) -> list[FlowRule]:
        """Every rule, most specific first, without figures (the metrics read them with the Stats snapshot)."""
        return await self.inbox.db.run(store.list_rules)

    async def list_flow_controls(self, *, caller: Caller) -> list[FlowControl]:
        """Every rule within the caller's grants, most specific first, with its live figures."""

        async def read(conn: Connection) -> list[FlowControl]:
            rules = [r for r in await store.list_rules(conn) if glob_within_any(r.pattern, caller.namespaces)]
            return [FlowControl(r, await store.rule_figures(conn, r), self._throttled(r)) for r in rules]

        return await self.inbox.db.run(read, custom_plans=True)
