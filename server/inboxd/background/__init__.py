"""What runs beside the RPCs without a caller: retention, the lease rescuer and the Stats gauges.

Periodic jobs over the same use cases and store as the RPCs. They run once per
inboxd instance, however many server processes it has.
"""
