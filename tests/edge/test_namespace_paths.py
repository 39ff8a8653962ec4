"""A "/" inside a body value: escaped as %2F by default, kept where the route writes {name:path}.

A GitHub repository's full name is "owner/name". By default the edge escapes
the "/" (``github/acme%2Fapp``), so two values can never run together into one
namespace; a route that wants the value's own hierarchy, so that a grant
``github/acme/*`` matches, writes ``{repo:path}``. Either way the value is
signed: it comes from the body.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from inboxd_edge.config import ConfigError, Route, config_from_data
from inboxd_edge.keys import resolve
from inboxd_edge.sources import Request


def github_route(namespace: str, **extra: Any) -> Route:
    route = {
        "name": "gh",
        "path": "/hooks/gh/{account}",
        "scheme": "github",
        "path_secrets": {"placeholder": "account", "secrets": {"acme": ["s"]}},
        "namespace": namespace,
        "vars": {"repo": "body:/repository/full_name"},
        "event_type": "const:push",
        "allowed_types": ["push"],
        **extra,
    }
    return config_from_data({"inboxd": {"target": "127.0.0.1:1"}, "routes": [route]}, {}).routes[0]


def namespace_of(route: Route, full_name: str) -> str:
    body = json.dumps({"repository": {"full_name": full_name}}).encode()
    return resolve(route, Request(json.loads(body), {}, {"account": "acme"}, body)).namespace


@pytest.mark.parametrize(
    ("template", "full_name", "namespace"),
    [
        ("github/{repo}", "acme/app", "github/acme%2Fapp"),
        ("github/{repo:path}", "acme/app", "github/acme/app"),
        ("github/{repo:path}", "acme/50%/x", "github/acme/50%25/x"),
        ("{account}/{repo:path}/events", "acme/app", "acme/acme/app/events"),
        ("github/{{literal}}/{repo:path}", "a/b", "github/{literal}/a/b"),
    ],
)
def test_a_slash_is_escaped_unless_the_route_keeps_it_with_path(template: str, full_name: str, namespace: str) -> None:
    assert namespace_of(github_route(template), full_name) == namespace


@pytest.mark.parametrize(
    ("template", "complaint"),
    [
        ("github/{repo:upper}", r"the only format is \{repo:path\}"),
        ("github/{repo!r}", r"the only format is \{repo:path\}"),
        ("github/{account:path}", r"\{account:path\} is not a var"),
    ],
)
def test_a_namespace_format_other_than_path_is_refused_at_load(template: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        github_route(template)
