"""The machinery the use cases run on inside one server process: group commit and waking waiting Claims.

In-memory and per process: it decides when a transaction runs and who is woken
after it, never what the transaction does. It knows nothing of gRPC.
"""
