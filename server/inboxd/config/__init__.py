"""What an operator sets for a server: the settings from the environment and flags, and the bearer tokens file.

Parsed and checked at start-up into plain values (`Settings`, `TokenRegistry`),
so that a mistake stops `inboxd serve` with a message naming the variable or
the file's entry, and the rooms that use them never parse text themselves.
"""
