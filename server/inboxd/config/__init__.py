"""What an operator sets: the settings from the environment and flags, and the bearer tokens file.

Read once at start-up and handed to every room as values, so that no room
reads the environment or a file of its own.
"""
