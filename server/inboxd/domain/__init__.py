"""The inbox's words and rules: states, records, errors and the state machines that decide a transition.

Plain values and pure functions, so every other room can share them and a
test can check a rule without a database or a server: `api/` and `console/`
translate to and from them, `store/` fills them. Nothing here imports gRPC or
psycopg.
"""
