"""What a DATABASE_URL names, said without its secret: for the log line every start writes."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict


def describe_database(url: str) -> str:
    """`host=H port=P dbname=D user=U` of a libpq URL or keyword string; never its password or passfile."""
    try:
        parts = conninfo_to_dict(url)
    except Exception as exc:  # noqa: BLE001 - psycopg's ProgrammingError: the URL itself is malformed
        raise ValueError(f"DATABASE_URL does not parse as a PostgreSQL URL: {type(exc).__name__}") from None
    shown = []
    for key, default in (("host", "(libpq's default socket)"), ("port", "5432"), ("dbname", None), ("user", None)):
        value = parts.get(key)
        if value is None and default is not None:
            value = default
        if value is not None:
            shown.append(f"{key}={value}")
    return " ".join(shown)
