"""inboxd: a durable inbox for webhook events, served over gRPC, backed by PostgreSQL."""

__version__ = "0.1.0"
