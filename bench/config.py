"""How long and how big each phase of a run is: the published defaults, and --quick's smoke sizes."""

from __future__ import annotations

from dataclasses import dataclass

# Concurrent claimers in every Claim figure, and in the peers' drain.
WORKERS = 16


@dataclass
class Config:
    warmup: float = 2.0
    duration: float = 8.0
    concurrency: tuple[int, ...] = (1, 16, 64)
    batch_rows: int = 100
    batch_clients: int = 16
    claim_workers: int = WORKERS
    claim_prefill: int = 150_000
    prime: float = 1.5
    history_rows: int = 5_000_000
    # The first seconds of Claim 10 -> Complete against a freshly migrated database.
    cold_window: float = 3.0
    backlog_rows: int = 100_000
    wake_runs: int = 5
    wake_rounds: int = 100
    long_polls: int = 5000
    long_poll_channels: int = 10
    long_poll_sample: float = 5.0
    # Issue 27: idle Work streams (sampled for long_poll_sample), rounds per Work wake-up run.
    idle_streams: int = 5000
    stream_wake_rounds: int = 500
    # py-spy: seconds recorded per profiled workload, samples per second.
    profile_seconds: float = 10.0
    profile_rate: int = 200
    # Issue 28 (flow control): the noisy namespace's backlog ahead of a quiet one's 10; namespaces
    # holding backlog under the every-namespace plan; events under max_in_flight; the rate's window
    # (seconds); rules set on other namespaces during the drain; A B B A rounds of fair ÷ before.
    flow_noisy: int = 2000
    flow_namespaces: int = 10_000
    flow_in_flight_events: int = 10_000
    flow_rate_seconds: float = 30.0
    flow_other_rules: int = 20
    flow_rounds: int = 2
    # Issue 30 (bulk operations): dead letters replayed at bulk_rate per second over the admin API, while
    # bulk_claimers Claim 10 -> CompleteBatch a backlog of another namespace (big enough to outlast the run).
    bulk_events: int = 50_000
    bulk_rate: float = 2000.0
    bulk_claimers: int = 8
    bulk_claim_backlog: int = 300_000
    # Issue 31 (tracing): rounds of windows A B C C B A (the server at 1bc5f2c, this one off, this one on).
    tracing_rounds: int = 2
    # Issue 44 (the edge): rounds of windows A B C C B A (bare aiohttp app, edge, edge --workers 2), on
    # edge_connections keep-alive connections, from edge_deliveries deliveries signed before each window
    # (sent again, and counted, if a window outruns them).
    edge_rounds: int = 1
    edge_connections: int = 64
    edge_deliveries: int = 150_000
    peer_jobs: int = 20_000
    # An unmeasured drain of this many jobs per system before the measured rounds.
    peer_priming_jobs: int = 2000
    peer_rounds: int = 3
    peer_enqueue_callers: tuple[int, ...] = (16, 64)
    # Enqueue -> a waiting worker starts, on an idle queue: rounds per system (issue 47).
    peer_latency_rounds: int = 200
    # The load generator's transport: h2 (hand-framed gRPC on node:http2) or grpc-js.
    transport: str = "h2"
    # Measured: uvloop lifts the raw 64-client INSERT baseline by about 40% and
    # leaves inboxd's figures alone, so the baseline is the stronger one with it.
    loop: str = "uvloop"
    # A window in which other processes took NOISY_PERCENT of a core is measured
    # again, this many times at most; the cleanest attempt is kept.
    noisy_retries: int = 1
    quick: bool = False
    # Only these phases (names as in suites.py), for trying one part; results then go where --quick's go.
    only: tuple[str, ...] = ()

    @classmethod
    def smoke(cls) -> Config:
        """--quick: every phase, tiny windows; its results prove the harness works and are never published."""
        return cls(
            warmup=0.2,
            duration=0.6,
            prime=0.5,
            claim_prefill=10_000,
            history_rows=50_000,
            backlog_rows=20_000,
            wake_runs=5,
            wake_rounds=10,
            long_polls=500,
            long_poll_sample=2.0,
            idle_streams=500,
            stream_wake_rounds=50,
            profile_seconds=1.0,
            profile_rate=100,
            flow_in_flight_events=1_000,
            flow_rate_seconds=4.0,
            bulk_events=4_000,
            bulk_claim_backlog=40_000,
            edge_deliveries=5_000,
            peer_jobs=1_000,
            peer_priming_jobs=300,
            peer_rounds=1,
            peer_latency_rounds=10,
            noisy_retries=0,
            quick=True,
        )
