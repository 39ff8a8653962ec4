"""The tokens file's expiries as gauges: a token about to lapse is found before its callers are refused.

Read at each scrape from the tokens in force (SIGHUP's reload included), so
a renewed or revoked token leaves the count at once. Counts, not a series per
token: token names are few but an operator's to choose, and the alert only
needs to know that one is due (`inboxd token list` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

EXPIRING_WITHIN = timedelta(days=7)


class TokenExpiryGauges(Collector):
    """inboxd_tokens_expiring_soon and inboxd_tokens_expired, from the expiries `expiries` answers."""

    def __init__(
        self, expiries: Callable[[], Sequence[datetime | None]], now: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._expiries = expiries
        self._now = now

    def collect(self) -> Iterator[Metric]:
        now = self._now()
        dated = [when for when in self._expiries() if when is not None]
        soon = GaugeMetricFamily(
            "inboxd_tokens_expiring_soon",
            "Tokens in the tokens file whose expires_at is within 7 days and not yet past: renew them.",
        )
        soon.add_metric([], sum(1 for when in dated if now < when <= now + EXPIRING_WITHIN))
        expired = GaugeMetricFamily(
            "inboxd_tokens_expired",
            "Tokens in the tokens file past their expires_at: every call with one is UNAUTHENTICATED.",
        )
        expired.add_metric([], sum(1 for when in dated if when <= now))
        yield from (soon, expired)
