"""inboxd: a durable inbox for webhook events, served over gRPC, backed by PostgreSQL."""

import os

# inboxd starts subprocesses (pg_ctl for the embedded PostgreSQL) while gRPC's
# threads run, and never uses gRPC in a forked child; without this, gRPC logs
# a warning about its fork handlers on every subprocess. Read by gRPC at import.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
