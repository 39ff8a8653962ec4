"""The deliveries table of an event's page: each POST a destination made of it (console/destinations_page.py)."""

from __future__ import annotations

from collections.abc import Sequence

from inboxd.console.html import h, table, when
from inboxd.domain.destinations import DeliveryAttempt


def deliveries_table(attempts: Sequence[DeliveryAttempt]) -> str:
    """Each POST a destination made of an event: when, status, latency, outcome, and the error or the answer."""
    return table(
        "Deliveries: each POST a destination made, oldest first",
        ("When", "Destination", "Attempt", "Fencing", "Status", "Latency", "Outcome", "Error or answer"),
        (
            [
                when(a.attempted_at),
                h(a.destination),
                h(a.attempt),
                h(a.fencing_token),
                h(a.status_code or "none"),
                h(f"{a.latency.total_seconds() * 1000:.0f} ms"),
                h(a.outcome),
                f"<code>{h((a.error or a.response_excerpt.decode('utf-8', 'replace'))[:300])}</code>",
            ]
            for a in attempts
        ),
        empty="No destination has POSTed this event.",
    )
