"""Client for inboxd. The generated stubs live in `inboxd_client.v1`."""
