"""What both sides of every comparison send: the same events, keys and payloads.

The payload is a typical provider webhook of about 300 bytes. Keys are unique
per run and per phase, so a phase never meets another's rows by accident.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from typing import LiteralString

EVENT_TYPE = "invoice.paid"
RUN_ID = uuid.uuid4().hex[:8]

PAYLOAD = json.dumps(
    {
        "id": "evt_1PqRsTuVwXyZ0123456789ab",
        "type": EVENT_TYPE,
        "created": 1767225600,
        "livemode": False,
        "data": {
            "object": {
                "id": "in_1PqRsTuVwXyZ0123456789ab",
                "object": "invoice",
                "amount_paid": 4200,
                "currency": "eur",
                "customer": "cus_QwErTyUiOp1234",
                "status": "paid",
                "lines": [{"price": "price_basic_monthly", "quantity": 1}],
            }
        },
    },
    separators=(",", ":"),
)
PAYLOAD_BYTES = PAYLOAD.encode()


class Keys:
    """Unique event keys for one phase; `issued` remembers the stored ones for the duplicate phase."""

    def __init__(self, phase: str, *, remember: bool = False) -> None:
        self.prefix = f"{RUN_ID}-{phase}-"
        self._counter = itertools.count()
        self.remember = remember
        self.issued: list[str] = []

    def next(self) -> str:
        return f"{self.prefix}{next(self._counter)}"

    def keep(self, key: str) -> None:
        """Remembers a key once it is known to be stored (a failed request stored nothing)."""
        if self.remember:
            self.issued.append(key)

    def batch(self, n: int) -> list[str]:
        return [self.next() for _ in range(n)]


def cycle(keys: list[str]) -> Iterator[str]:
    if not keys:
        raise RuntimeError("no keys to repeat: the phase that should have issued them issued none")
    return itertools.cycle(keys)


# Pending events straight into the table, for the claim phases: what Accept
# would have stored, minus the round trips. The payload is bytes into
# raw_payload (%(payload)b, binary), as inboxd writes since migration 0019, so
# that a claim reads the rows as it reads new ones, not through the coalesce
# that renders an older row's jsonb.
PREFILL_PENDING: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at,
                          available_at, due_at, updated_at)
SELECT %(namespace)s, %(prefix)s || g, %(event_type)s, %(payload)b, 'pending',
       now(), now() - (%(n)s - g) * interval '1 microsecond',
       now() - (%(n)s - g) * interval '1 microsecond', now()
FROM generate_series(1, %(n)s) AS g
"""

# The same, each event under one of `keys` ordering keys (revisions growing
# with acceptance), for the claim figure over ordering keys. The accept
# trigger of migration 0008 fills inbox_ordering_keys as Accept would.
PREFILL_PENDING_ORDERED: LiteralString = """
INSERT INTO inbox_events (namespace, event_key, event_type, raw_payload, state, accepted_at,
                          available_at, due_at, updated_at, ordering_key, revision)
SELECT %(namespace)s, %(prefix)s || g, %(event_type)s, %(payload)b, 'pending',
       now(), now() - (%(n)s - g) * interval '1 microsecond',
       now() - (%(n)s - g) * interval '1 microsecond', now(),
       'customer-' || (g %% %(keys)s), g / %(keys)s + 1
FROM generate_series(1, %(n)s) AS g
"""

# Between phases: nothing left claimable, no leftovers of earlier phases.
# CASCADE: every ledger that references an event goes with it, tables added later included;
# the ordering keys reference none (their applied revisions outlive events), so they are named.
CLEAR_EVENTS: LiteralString = (
    "TRUNCATE inbox_events, inbox_ordering_keys, inbox_state_counts, inbox_state_count_changes CASCADE"
)
