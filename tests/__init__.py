import os

# Before anything imports grpc: the harness forks (pg_ctl as the postgres
# user) while gRPC threads run, and gRPC's fork handlers can crash the child.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
