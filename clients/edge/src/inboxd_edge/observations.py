"""What the edge observes besides each request's log line: handshakes, ignored types, signature failures.

One function per observation, each called from one place in the request flow
(inboxd_edge.app), each logged at INFO and counted in the inboxd_edge_*
metrics (inboxd_edge.edge_metrics). A signature failure is counted where the
request's answer is (inboxd_edge.app), from its reason, so once only.
"""

from __future__ import annotations

import logging

from inboxd_edge import edge_metrics

log = logging.getLogger("inboxd_edge.observations")


def handshake(route: str, kind: str) -> None:
    """A provider's URL check was answered (nothing stored)."""
    log.info("handshake route=%r kind=%r", route, kind)
    edge_metrics.count_handshake(route, kind)


def ignored_type(route: str, event_type: str) -> None:
    """A delivery of a type the route does not list was answered 200 and dropped (other_types = "ignore")."""
    log.info("ignored type route=%r type=%r", route, event_type)
    edge_metrics.count_ignored_type(route, event_type)


def signature_failure(route: str, reason: str) -> None:
    """A delivery was refused 401: unsigned, badly signed, stale, or with a wrong client state."""
    log.info("signature failure route=%r reason=%r", route, reason)
