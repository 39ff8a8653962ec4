"""gRPC servicers: protobuf in, domain calls, protobuf or a status code out. No SQL."""
