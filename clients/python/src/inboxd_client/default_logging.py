"""The worker's INFO lines on stderr when the application set up no logging of its own."""

from __future__ import annotations

import logging

PACKAGE_LOGGER = "inboxd_client"
_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class _DefaultHandler(logging.StreamHandler):  # type: ignore[type-arg]  # StreamHandler is generic in typeshed
    """Ours: recognised, so it is added once and never beside a handler the application installed."""


def log_by_default() -> None:
    """Gives inboxd_client's loggers a stderr handler at INFO, unless the application configured logging.

    Python shows only warnings by default, so a worker that starts, works and
    stops said nothing; a line per start, stop and failure (never one per
    event) is what someone running the README's ten lines expects to see.
    An application that configured logging (a root handler, or one on
    `inboxd_client`) before `run()` keeps full control: nothing is added.
    """
    package = logging.getLogger(PACKAGE_LOGGER)
    if logging.getLogger().handlers or package.handlers:
        return
    handler = _DefaultHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    package.addHandler(handler)
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
