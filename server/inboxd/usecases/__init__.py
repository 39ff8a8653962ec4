"""What callers can ask of the inbox: the data plane's transitions and the operators' inspections and replays.

Between the adapters (`api/`, `console/`) and the `store/`: a use case takes
validated domain values, decides what runs in one transaction and who hears
of it, and writes no SQL. It knows nothing of gRPC.
"""
