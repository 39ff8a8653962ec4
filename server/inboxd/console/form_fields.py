"""The console's form fields as typed values: text, a number, a UTC instant; bad input names its field.

Each answers what the operator typed, trimmed, or None when left blank, and
raises InvalidArgument naming the field otherwise, so a page can show the
refusal in words beside the form the operator filled in.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from inboxd.domain.errors import InvalidArgument, NotFound, PermissionDenied, TooManyRequests, TransitionNotAllowed

if TYPE_CHECKING:
    from aiohttp import web
    from multidict import MultiMapping

    # What aiohttp's request.post() answers (request.query is one too, of text only).
    FormData = MultiMapping[str | bytes | bytearray | web.FileField]

# The refusals a page shows in words beside its forms; anything else is the console's error page.
REFUSALS = (InvalidArgument, PermissionDenied, NotFound, TransitionNotAllowed, TooManyRequests)


def text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def texts(form: FormData, name: str) -> tuple[str, ...]:
    """Every value of a repeated field (checkboxes), trimmed, blanks left out."""
    return tuple(v.strip() for v in form.getall(name, []) if isinstance(v, str) and v.strip())


def decimal(form: FormData, name: str) -> float | None:
    said = text(form, name)
    if not said:
        return None
    try:
        value = float(said)
    except ValueError:
        raise InvalidArgument(name, f"{said!r} is not a number") from None
    if not math.isfinite(value):
        raise InvalidArgument(name, f"{said!r} is not a finite number")
    return value


def instant(form: FormData, name: str) -> datetime | None:
    """An instant in UTC, as a datetime-local field or ISO 8601 says it ("2026-12-02T06:00", "...Z")."""
    said = text(form, name)
    if not said:
        return None
    try:
        value = datetime.fromisoformat(said)
    except ValueError:
        raise InvalidArgument(name, f"{said!r} is not a time such as 2026-12-02T06:00 (UTC)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
