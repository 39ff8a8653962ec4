"""`inboxd_build_info{version}`: which inboxd an instance runs, for dashboards and upgrade checks."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import inboxd


class BuildInfo(Collector):
    """A constant 1 labelled with the running version, the Prometheus convention for build facts.

    A collector rather than a Gauge: under --workers N the parent's registry
    reads its children's multiprocess files, and a constant needs none.
    """

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("inboxd_build_info", "The inboxd version this instance runs.", labels=["version"])
        family.add_metric([inboxd.__version__], 1)
        yield family
