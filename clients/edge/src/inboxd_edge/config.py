"""The edge's configuration: where inboxd is, and one table per webhook route, from a TOML or JSON file.

Secrets may sit in the file (``secrets``) or, better, in environment variables
the file names (``secrets_env``). Unknown keys are errors: a misspelt
``allowed_types`` must not silently accept every event type.
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inboxd_edge.identity import check_signed, check_unshared, namespace_sources, unsigned_type_allowed
from inboxd_edge.inboxd_settings import InboxdSettings, InboxdSettingsError, inboxd_settings
from inboxd_edge.ops_settings import OpsSettings, OpsSettingsError, ops_settings
from inboxd_edge.presets import PRESETS, HandshakeKind
from inboxd_edge.presets.base import DEFAULT_TOLERANCE_SECONDS
from inboxd_edge.signatures import Verifier
from inboxd_edge.sources import Source
from inboxd_edge.twilio_signature import check_public_url
from inboxd_edge.verifier_settings import verifiers_for

__all__ = ["DEFAULT_TOLERANCE_SECONDS", "ConfigError", "EdgeConfig", "Route", "config_from_data", "load_config"]
OTHER_TYPES = ("reject", "ignore", "accept")
# Not 8080: the README's console example listens there, and both on one machine is the first thing one tries.
DEFAULT_LISTEN = "127.0.0.1:8081"
# inboxd's own default payload limit (INBOXD_MAX_PAYLOAD_BYTES).
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
# Never copied into metadata: they authenticate, they do not describe the event.
_UNKEEPABLE_HEADERS = {"authorization", "cookie", "proxy-authorization"}

ROUTE_KEYS = {
    "name",
    "path",
    "scheme",
    "secrets",
    "secrets_env",
    "tolerance_seconds",
    "max_body_bytes",
    "allowed_types",
    "namespace",
    "vars",
    "event_key",
    "event_type",
    "key_includes_type",
    "delivery_id",
    "message_id",
    "ordering_key",
    "keep_headers",
    "payload_drop",
    "hmac",
    "path_secrets",
    "public_url",
    "public_key",
    "public_key_env",
    "verify_token_env",
    "client_state_env",
    "other_types",
}


class ConfigError(Exception):
    """The configuration cannot be used; the message names the route and the field."""


@dataclass(frozen=True)
class Route:
    """One webhook endpoint: how to verify it, which events it takes, and how to name them."""

    name: str
    path: str
    scheme: str
    # The route's verifier under "", or, with path_secrets, one per value of that placeholder.
    verifiers: Mapping[str, Verifier]
    secret_placeholder: str | None
    max_body_bytes: int
    allowed_types: frozenset[str]
    # A str.format template over `variables` and the path's placeholders, e.g. "mailera/{account}".
    namespace: str
    # The template's names written {name:path}: their values keep "/" (others have it escaped as %2F).
    namespace_paths: frozenset[str]
    variables: Mapping[str, Source]
    event_key: Source
    event_type: Source
    # Set when the provider's id does not tell event types apart (one Message-ID, two types).
    key_includes_type: bool
    delivery_id: Source | None
    message_id: Source | None
    ordering_key: Source | None
    keep_headers: tuple[str, ...]
    # Delivery-only body members removed before Accept, so a retry stays a DUPLICATE.
    payload_drop: tuple[Source, ...]
    # (owner, fingerprint) of every secret, to refuse two routes or accounts that share one.
    secret_owners: tuple[tuple[str, str], ...] = ()
    # The URL the provider calls, for a scheme that signs it (Twilio): behind a proxy, not the edge's own.
    public_url: str | None = None
    # The provider's URL check this route answers (inboxd_edge.handshakes), and Meta's verify token for it.
    handshake: HandshakeKind | None = None
    verify_token: str | None = None
    # What a type outside allowed_types gets: "reject" (422), "ignore" (200, nothing stored) or "accept".
    other_types: str = "reject"
    # A JSON pointer's tokens to an array of events in one body (Microsoft Graph's /value), or None.
    items: tuple[str, ...] | None = None

    def verifier_for(self, path_params: Mapping[str, str]) -> Verifier | None:
        """The verifier for this request's path, or None for an account the route has no secret for."""
        return self.verifiers.get(path_params.get(self.secret_placeholder, "") if self.secret_placeholder else "")


@dataclass(frozen=True)
class EdgeConfig:
    """The whole edge: its listen address, inboxd, and the routes."""

    listen: str
    inboxd: InboxdSettings
    routes: tuple[Route, ...]
    # [limits], [metrics] and [log] (inboxd_edge.ops_settings).
    ops: OpsSettings = field(default_factory=OpsSettings)


def load_config(path: Path, environ: Mapping[str, str]) -> EdgeConfig:
    """Reads a .toml or .json file; raises ConfigError for anything unusable."""
    try:
        text = path.read_text(encoding="utf-8")
        data: dict[str, Any] = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return config_from_data(data, environ)


def config_from_data(data: Mapping[str, Any], environ: Mapping[str, str]) -> EdgeConfig:
    """Builds the configuration from parsed TOML/JSON data."""
    edge = _table(data, "edge")
    try:
        inboxd = inboxd_settings(_table(data, "inboxd"))
        ops = ops_settings(data)
    except (InboxdSettingsError, OpsSettingsError) as exc:
        raise ConfigError(str(exc)) from exc
    routes_data = data.get("routes")
    if not isinstance(routes_data, list) or not routes_data:
        raise ConfigError("at least one [[routes]] table is required")
    routes = tuple(_route(r, environ, i) for i, r in enumerate(routes_data))
    paths = [r.path for r in routes]
    if len(set(paths)) != len(paths):
        raise ConfigError("two routes share one path")
    try:
        check_unshared(owner for r in routes for owner in r.secret_owners)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return EdgeConfig(
        listen=str(edge.get("listen", DEFAULT_LISTEN)),
        inboxd=inboxd,
        routes=routes,
        ops=ops,
    )


def _table(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ConfigError(f"[{name}] must be a table")
    return value


def _route(data: Any, environ: Mapping[str, str], index: int) -> Route:
    if not isinstance(data, dict):
        raise ConfigError(f"routes[{index}] must be a table")
    where = f"route {data.get('name') or data.get('path') or index}"
    try:
        return _build_route(data, environ, where)
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _build_route(data: dict[str, Any], environ: Mapping[str, str], where: str) -> Route:
    if unknown := set(data) - ROUTE_KEYS:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    path = _required_str(data, "path")
    if not path.startswith("/"):
        raise ValueError("path must start with /")
    scheme = _required_str(data, "scheme")
    if scheme not in PRESETS:
        raise ValueError(f"scheme {scheme!r} is not one of {sorted(PRESETS)}")
    preset = PRESETS[scheme]

    def source(name: str, *, required: bool) -> Source | None:
        text = data.get(name, preset.defaults.get(name))
        if text is None:
            if required:
                raise ValueError(f"{name} is required for scheme {scheme!r}")
            return None
        return Source.parse(str(text))

    allowed = data.get("allowed_types")
    if not isinstance(allowed, list) or not allowed or not all(isinstance(t, str) and t for t in allowed):
        raise ValueError("allowed_types must list the event types this route accepts")
    variables = {str(k): Source.parse(str(v)) for k, v in _dict(data, "vars").items()}
    namespace, slashed = _namespace_template(_required_str(data, "namespace"), set(variables))
    _check_template(namespace, set(variables) | _path_params(path))
    drops = tuple(Source.parse(str(s)) for s in data.get("payload_drop", []))
    if any(d.kind != "body" for d in drops):
        raise ValueError("payload_drop takes body: sources only")
    keep = tuple(str(h) for h in data.get("keep_headers", []))
    if any(h.lower() in _UNKEEPABLE_HEADERS or "signature" in h.lower() for h in keep):
        raise ValueError("keep_headers may not name authentication or signature headers")
    event_key = source("event_key", required=True)
    event_type = source("event_type", required=True)
    assert event_key is not None and event_type is not None
    name = str(data.get("name", path))
    bound, verifiers, owners = verifiers_for(data, environ, scheme, name, _path_params(path))
    signed = next(iter(verifiers.values())).signed_headers
    public_url = _public_url(data, next(iter(verifiers.values())).signs_url, scheme, _path_params(path))
    identity = {"event_key": event_key, "event_type": event_type}
    if ordering_key := source("ordering_key", required=False):
        identity["ordering_key"] = ordering_key
    template_names = _template_names(namespace)
    for var, var_source in namespace_sources(template_names, variables, _path_params(path)).items():
        identity[f"namespace's {{{var}}}"] = var_source
    if unsigned_type_allowed(scheme, event_type, event_key, bool(data.get("key_includes_type", False))):
        del identity["event_type"]
    for field_name, field_source in identity.items():
        check_signed(field_name, field_source, scheme=scheme, verifier_headers=signed, bound=bound)
    return Route(
        name=name,
        path=path,
        scheme=scheme,
        verifiers=verifiers,
        secret_placeholder=bound,
        secret_owners=owners,
        max_body_bytes=int(data.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)),
        allowed_types=frozenset(allowed),
        namespace=namespace,
        namespace_paths=slashed,
        variables=variables,
        event_key=event_key,
        event_type=event_type,
        key_includes_type=bool(data.get("key_includes_type", False)),
        delivery_id=source("delivery_id", required=False),
        message_id=source("message_id", required=False),
        ordering_key=ordering_key,
        keep_headers=keep,
        payload_drop=drops,
        public_url=public_url,
        handshake=preset.handshake,
        verify_token=_verify_token(data, environ, scheme),
        other_types=_other_types(data),
        items=_items(preset.items),
    )


def _items(pointer: str | None) -> tuple[str, ...] | None:
    """The tokens of a preset's items pointer: "" is the body itself (an array of events), None no items."""
    if pointer is None:
        return None
    return Source.parse("body:" + pointer).tokens if pointer else ()


def _verify_token(data: dict[str, Any], environ: Mapping[str, str], scheme: str) -> str | None:
    """Meta's verify token, from the variable verify_token_env names: required on a meta route, refused elsewhere."""
    name = data.get("verify_token_env")
    if PRESETS[scheme].handshake != "meta":
        if name is not None:
            raise ValueError(f"verify_token_env is only for scheme 'meta', not {scheme!r}")
        return None
    if not isinstance(name, str) or not environ.get(name):
        raise ValueError(
            "scheme 'meta' needs verify_token_env, a variable holding the verify token set in Meta's dashboard"
        )
    return environ[name]


def _other_types(data: dict[str, Any]) -> str:
    value = data.get("other_types", "reject")
    if value not in OTHER_TYPES:
        raise ValueError(f"other_types must be one of {', '.join(OTHER_TYPES)}, not {value!r}")
    return str(value)


def _public_url(data: dict[str, Any], signs_url: bool, scheme: str, path_params: set[str]) -> str | None:
    """The route's public_url: required where the scheme signs the URL, refused where it would be ignored."""
    value = data.get("public_url")
    if not signs_url:
        if value is not None:
            raise ValueError(f"public_url is only for a scheme that signs the URL (twilio, {{url}}), not {scheme!r}")
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"public_url is required for scheme {scheme!r}: the URL the provider calls, which it signs")
    check_public_url(value, path_params)
    return value


def _required_str(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} is required")
    return value


def _dict(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a table")
    return value


def _path_params(path: str) -> set[str]:
    """The names of the path's {placeholders}; aiohttp allows {name:regex}."""
    return set(re.findall(r"\{(\w+)(?::[^}]*)?\}", path))


def _template_names(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def _namespace_template(template: str, variables: set[str]) -> tuple[str, frozenset[str]]:
    """The namespace template without its ``:path`` marks, and the names that had one.

    ``{repo:path}`` keeps the "/" in a var's value (``github/acme/app``, which a grant ``github/acme/*`` matches);
    any other format or conversion is refused here rather than failing on the first delivery.
    """
    out: list[str] = []
    slashed: set[str] = set()
    for literal, name, spec, conversion in string.Formatter().parse(template):
        out.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if conversion or (spec and spec != "path"):
            raise ValueError(f"namespace field {{{name}...}}: the only format is {{{name}:path}}")
        if spec == "path":
            if name not in variables:
                raise ValueError(f"namespace's {{{name}:path}} is not a var: :path keeps the '/' of a var's value")
            slashed.add(name)
        out.append("{" + name + "}")
    return "".join(out), frozenset(slashed)


def _check_template(template: str, names: set[str]) -> None:
    used = _template_names(template)
    if missing := used - names:
        raise ValueError(f"namespace uses {sorted(missing)}, which neither vars nor the path define")
