"""inboxd: a durable inbox for webhook events, served over gRPC, backed by PostgreSQL."""

import os

# inboxd starts subprocesses (pg_ctl for the embedded PostgreSQL) while gRPC's
# threads run, and never uses gRPC in a forked child; without this, gRPC logs
# a warning about its fork handlers on every subprocess. Read by gRPC at import.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# gRPC's C core prints INFO lines of its own (`I1205 ... ssl_transport_security.cc ... Handshake failed`
# for each client that speaks plaintext to TLS) straight to stderr, breaking the JSON log. Read once, when
# grpc is imported (setting it later changes nothing); GRPC_VERBOSITY=INFO in the environment shows them.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__version__ = "0.1.0"
