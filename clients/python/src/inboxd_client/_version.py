"""The client's version, in a module of its own: its modules read it here, never from the package's __init__.

The __init__ imports the worker, and the worker its tracing: tracing reading
`inboxd_client.__version__` would be an import circle through the __init__.
"""

__version__ = "0.1.0"
