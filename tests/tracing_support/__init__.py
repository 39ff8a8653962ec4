"""What the tracing tests share: a real OTLP/gRPC receiver (otlp_receiver.py)."""
