"""The operators' web console: an HTTP adapter beside `api/`, on the same use cases (`inboxd.usecases.admin`).

Off unless INBOXD_CONSOLE_LISTEN is set. Server-rendered HTML, signed in
with an admin-scoped bearer token, namespace grants honoured as in
InboxAdminService. It imports neither grpc nor psycopg, and no SQL.
"""

from inboxd.console.app import Console, start_console

__all__ = ["Console", "start_console"]
