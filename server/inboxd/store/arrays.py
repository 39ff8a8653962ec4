"""One column of a group as one array parameter in PostgreSQL's binary format, built in few steps.

A group's events go to PostgreSQL as one text[] or bytea[] per column
(store/accepts.py), which unnest splits without parsing anything: no JSON
for PostgreSQL to parse again, no quoting or escaping on either side.
psycopg's own list dumper runs a Python loop of calls per element (a
dumper's, a length's, an append); here each element is one concatenation in
a list comprehension, joined once.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

_TEXT_OID, _TEXT_ARRAY_OID = 25, 1009
_BYTEA_OID, _BYTEA_ARRAY_OID = 17, 1001

# The binary array header: dimensions, has-nulls, element type; then one
# dimension's length and lower bound; each element is then its length and bytes.
_HEADER = struct.Struct(">iiIii")
_LENGTH = struct.Struct(">i").pack


def _array(element_oid: int, items: list[bytes]) -> bytes:
    if not items:
        return _HEADER.pack(0, 0, element_oid, 0, 0)[:12]
    # Measured against b"".join(chain(zip(map(...)))): a list of concatenations joins faster, payloads too.
    return _HEADER.pack(1, 0, element_oid, len(items), 1) + b"".join([_LENGTH(len(item)) + item for item in items])


class Texts:
    """A text[] parameter: the strings' UTF-8 (each checked to encode: validation refuses lone surrogates and NUL)."""

    __slots__ = ("data",)

    def __init__(self, values: Iterable[str]) -> None:
        self.data = _array(_TEXT_OID, list(map(str.encode, values)))


class Byteas:
    """A bytea[] parameter: the bytes as they are."""

    __slots__ = ("data",)

    def __init__(self, values: Iterable[bytes]) -> None:
        self.data = _array(_BYTEA_OID, list(values))


class _TextsDumper(Dumper):
    format = Format.BINARY
    oid = _TEXT_ARRAY_OID

    def dump(self, obj: Any) -> Buffer | None:
        data: bytes = obj.data
        return data


class _ByteasDumper(Dumper):
    format = Format.BINARY
    oid = _BYTEA_ARRAY_OID

    def dump(self, obj: Any) -> Buffer | None:
        data: bytes = obj.data
        return data


# Only these two classes are taught, on every connection: nothing else dumps differently.
psycopg.adapters.register_dumper(Texts, _TextsDumper)
psycopg.adapters.register_dumper(Byteas, _ByteasDumper)
