"""inboxd's HTTP edge: verifies a provider's webhook signature, then hands the event to inboxd with Accept.

The pieces, in the order a request meets them: `signatures` (is it really the
provider?), `sources` and `keys` (which logical event is it?), `forward` (Accept,
over the pool of AcceptStreams in `stream_pool` or unary, and what to answer
the provider), `app` (the HTTP handler tying them together).
`config` and `presets` describe routes as data, so a new provider is configuration,
not code.
"""

__version__ = "0.1.0"
