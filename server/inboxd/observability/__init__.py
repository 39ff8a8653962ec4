"""How an operator sees inboxd at work: structured logs, Prometheus metrics and the log of transitions.

The use cases report what they did through an observer; what is counted and
logged is decided here, from domain values alone, so no room above has to
count or log for itself.
"""
