"""Generated inboxd.v1 stubs. Made by scripts/gen_proto.sh (make proto); never edit."""
