"""Subscriptions (fan-out at accept): what one is, how its copies are named, and the checks on a new one.

A subscription names a subscriber and a namespace pattern. Every event an
Accept inserts into a namespace the pattern matches (of one of its event
types, when it names any) is inserted again, in the same transaction, as
an event of the subscriber's own, in the namespace `<name>/<origin
namespace>`: a grant of `team-a/*` then covers every copy team-a's
subscriptions make, and nothing else's. A copy is an ordinary event from
then on; nothing ties it to its original but its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from inboxd.domain import validation
from inboxd.domain.errors import InvalidArgument
from inboxd.domain.vocabulary import AcceptResult, Namespace, NewEvent

# A subscriber's name heads every copy's namespace, which is at most this
# long plus one plus the origin's (512 bytes): short, as a team's name is.
MAX_NAME_BYTES = 128
MAX_EVENT_TYPES = 100


def copy_namespace(name: str, origin_namespace: str) -> str:
    """The namespace a subscription's copy of an event stands in (accepts.sql writes the same)."""
    return f"{name}/{origin_namespace}"


@dataclass(frozen=True, slots=True)
class SubscriptionSpec:
    """What an operator asks for: validated when made (InvalidArgument naming the field)."""

    name: str
    namespace_pattern: str
    event_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_name("name", self.name)
        validation.check_identity("namespace_pattern", self.namespace_pattern)
        if len(self.event_types) > MAX_EVENT_TYPES:
            raise InvalidArgument("event_types", f"has {len(self.event_types)} types; the limit is {MAX_EVENT_TYPES}")
        for i, event_type in enumerate(self.event_types):
            validation.check_identity(f"event_types[{i}]", event_type)


def check_name(field: str, name: str) -> str:
    """A subscriber's name: a plain name (no `*`, no trailing `/`), at most MAX_NAME_BYTES."""
    validation.check_identity(field, name)
    if len(name.encode()) > MAX_NAME_BYTES:
        raise InvalidArgument(field, f"is {len(name.encode())} bytes; the limit is {MAX_NAME_BYTES}")
    if "*" in name:
        raise InvalidArgument(field, "may not hold `*`: it heads its copies' namespaces, which are names, not patterns")
    if name.endswith("/"):
        raise InvalidArgument(field, "may not end with `/`: its copies are named `<name>/<origin namespace>`")
    return name


@dataclass(frozen=True, slots=True)
class Subscription:
    """A subscription as stored."""

    name: str
    namespace_pattern: str
    event_types: tuple[str, ...]
    created_at: datetime
    created_by: str

    def same_definition(self, spec: SubscriptionSpec) -> bool:
        """Whether `spec` asks for this very subscription (a retried create answers it, unchanged)."""
        return self.namespace_pattern == spec.namespace_pattern and sorted(self.event_types) == sorted(spec.event_types)


@dataclass(frozen=True, slots=True)
class SubscriptionChange:
    """One audited creation or removal of a subscription."""

    name: str
    actor: str
    reason: str
    changed_at: datetime
    before: str
    after: str


def describe(pattern: str | None, event_types: Sequence[str] = ()) -> str:
    """A subscription in words for its audit row ("none" for no subscription)."""
    if pattern is None:
        return "none"
    types = ", ".join(event_types) if event_types else "every type"
    return f"namespaces {pattern}, {types}"


def fanned_out(
    events: Sequence[NewEvent], results: Sequence[AcceptResult | None], copied: Sequence[tuple[int, str]]
) -> tuple[list[NewEvent], list[AcceptResult]]:
    """The copies an accept group inserted, as the events they are, with their originals' (ACCEPTED) results.

    A copy is inserted only with its original, in the same committed round, so its original's result is set.
    """
    copies: list[NewEvent] = []
    copy_results: list[AcceptResult] = []
    for index, namespace in copied:
        result = results[index]
        if result is not None:
            copies.append(dataclasses.replace(events[index], namespace=Namespace(namespace)))
            copy_results.append(result)
    return copies, copy_results
