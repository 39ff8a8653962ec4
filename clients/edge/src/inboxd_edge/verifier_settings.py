"""A route's verifier from its settings: which key material (secrets, public keys, a client state), per account.

Key material comes from the route file or, better, from environment
variables it names: ``secrets``/``secrets_env`` for shared-secret schemes,
``public_key``/``public_key_env`` for public-key schemes (not secret, but
still the route's to choose), ``client_state_env`` for Microsoft Graph. With
``[routes.path_secrets]`` each account of the path has its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inboxd_edge.asymmetric import PublicKeyVerifier
from inboxd_edge.body_signatures import MailgunVerifier, MandrillVerifier
from inboxd_edge.hmac_template import HmacVerifier, hmac_scheme
from inboxd_edge.identity import fingerprint
from inboxd_edge.presets import PRESETS
from inboxd_edge.presets.base import DEFAULT_TOLERANCE_SECONDS
from inboxd_edge.shared_tokens import ClientStateVerifier, TokenVerifier
from inboxd_edge.signatures import StandardWebhooksVerifier, Verifier
from inboxd_edge.twilio_signature import TwilioVerifier

PATH_SECRETS_KEYS = {"placeholder", "secrets", "secrets_env"}
# The header GitLab puts its shared token in.
GITLAB_TOKEN_HEADER = "X-Gitlab-Token"


def verifiers_for(
    data: dict[str, Any], environ: Mapping[str, str], scheme: str, name: str, path_params: set[str]
) -> tuple[str | None, dict[str, Verifier], tuple[tuple[str, str], ...]]:
    """The bound placeholder (or None), the verifiers by its value (or under ""), and each secret's owner."""
    table = data.get("path_secrets")
    if table is None:
        secrets = _key_material(data, environ, scheme)
        return None, {"": _verifier(data, secrets, scheme)}, tuple((f"route {name}", fingerprint(s)) for s in secrets)
    if not isinstance(table, dict):
        raise ValueError("path_secrets must be a table")
    if unknown := set(table) - PATH_SECRETS_KEYS:
        raise ValueError(f"path_secrets: unknown keys {sorted(unknown)} (it takes {sorted(PATH_SECRETS_KEYS)})")
    if "secrets" in data or "secrets_env" in data:
        raise ValueError("a route with path_secrets takes its secrets from there only")
    placeholder = table.get("placeholder")
    if placeholder not in path_params:
        raise ValueError(f"path_secrets.placeholder must name one of the path's placeholders {sorted(path_params)}")
    values = set(dict_of(table, "secrets")) | set(dict_of(table, "secrets_env"))
    if not values:
        raise ValueError("path_secrets needs secrets or secrets_env, a list per account")
    verifiers: dict[str, Verifier] = {}
    owners: list[tuple[str, str]] = []
    for value in sorted(values):
        per_value = {
            "secrets": dict_of(table, "secrets").get(value, []),
            "secrets_env": dict_of(table, "secrets_env").get(value, []),
        }
        secrets = _secrets(per_value, environ, f"path_secrets for {placeholder}={value!r}: ")
        verifiers[value] = _verifier(data, secrets, scheme)
        owners.extend((f"route {name} {placeholder}={value!r}", fingerprint(s)) for s in secrets)
    return str(placeholder), verifiers, tuple(owners)


def _key_material(data: Mapping[str, Any], environ: Mapping[str, str], scheme: str) -> list[str]:
    """The route's own key material, from the settings its scheme's kind reads."""
    kind = PRESETS[scheme].verifier
    if kind in ("ed25519", "ecdsa"):
        if "secrets" in data or "secrets_env" in data:
            raise ValueError(f"scheme {scheme!r} verifies with the provider's public key: public_key or public_key_env")
        return _secrets(
            {"secrets": _listed(data, "public_key"), "secrets_env": _listed(data, "public_key_env")},
            environ,
            "",
            what="public key (public_key or public_key_env)",
            env_setting="public_key_env",
        )
    if kind == "client-state":
        if "secrets" in data or "secrets_env" in data:
            raise ValueError(f"scheme {scheme!r} checks each item's clientState: name it with client_state_env")
        return _secrets(
            {"secrets_env": _listed(data, "client_state_env")},
            environ,
            "",
            what="client state (client_state_env)",
            env_setting="client_state_env",
        )
    for name in ("public_key", "public_key_env", "client_state_env"):
        if name in data:
            raise ValueError(f"{name} is not for scheme {scheme!r}, which takes secrets or secrets_env")
    return _secrets(data, environ, "")


def _listed(data: Mapping[str, Any], name: str) -> list[str]:
    value = data.get(name, [])
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _secrets(
    data: Mapping[str, Any],
    environ: Mapping[str, str],
    where: str,
    what: str = "secret (secrets or secrets_env)",
    env_setting: str = "secrets_env",
) -> list[str]:
    secrets = [str(s) for s in data.get("secrets", [])]
    for name in data.get("secrets_env", []):
        if not environ.get(name):
            raise ValueError(f"{where}{env_setting} names {name!r}, which is unset or empty")
        secrets.append(environ[name])
    if not secrets or not all(secrets):
        raise ValueError(f"{where}at least one non-empty {what} is required")
    return secrets


def _verifier(data: dict[str, Any], secrets: list[str], scheme: str) -> Verifier:
    preset = PRESETS[scheme]
    tolerance = float(data.get("tolerance_seconds", preset.tolerance or DEFAULT_TOLERANCE_SECONDS))
    overrides = dict_of(data, "hmac")
    if overrides and preset.verifier != "hmac":
        raise ValueError(f"[routes.hmac] is only for HMAC schemes, not {scheme!r}")
    if preset.verifier == "standard-webhooks":
        return StandardWebhooksVerifier.from_secrets(secrets, tolerance)
    if preset.verifier == "twilio":
        return TwilioVerifier(tuple(s.encode() for s in secrets))
    if preset.asymmetric is not None:
        return PublicKeyVerifier.for_scheme(preset.asymmetric, secrets, tolerance)
    if preset.verifier == "token":
        return TokenVerifier(GITLAB_TOKEN_HEADER, tuple(s.encode() for s in secrets))
    if preset.verifier == "client-state":
        return ClientStateVerifier(tuple(s.encode() for s in secrets))
    if preset.verifier == "mailgun":
        return MailgunVerifier(tuple(s.encode() for s in secrets), tolerance)
    if preset.verifier == "mandrill":
        return MandrillVerifier(tuple(s.encode() for s in secrets))
    if preset.hmac is None and not overrides:
        raise ValueError("scheme 'hmac' needs an [routes.hmac] table")
    return HmacVerifier.from_secrets(hmac_scheme(preset.hmac, overrides), secrets, tolerance)


def dict_of(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The table `name` of `data` ({} when absent); raises ValueError when it is not a table."""
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a table")
    return value
