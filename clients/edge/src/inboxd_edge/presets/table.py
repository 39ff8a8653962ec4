"""The README's table of presets, made from the presets themselves (tests/edge/test_edge_readme.py compares them).

Run ``python -m inboxd_edge.presets.table`` to print it.
"""

from __future__ import annotations

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets import PRESETS
from inboxd_edge.presets.base import DEFAULT_TOLERANCE_SECONDS, Preset

_KINDS = {
    "standard-webhooks": "`webhook-*` or `svix-*`: HMAC-SHA256 of `{id}.{timestamp}.{body}`, base64, `v1,` list",
    "twilio": "`X-Twilio-Signature`: HMAC-SHA1 of URL + sorted form fields, base64",
    "token": "`X-Gitlab-Token` equals the secret",
    "client-state": "each item's `clientState` equals `client_state_env`'s value",
    "mailgun": "body `signature`: HMAC-SHA256 of timestamp + token, hex",
    "mandrill": "`X-Mandrill-Signature`: HMAC-SHA1 of URL + sorted form fields, base64",
}
_UNSTAMPED = ("twilio", "token", "client-state", "mandrill")


def _signature(preset: Preset) -> str:
    if preset.asymmetric is not None:
        scheme = preset.asymmetric
        return f"`{scheme.signature_header}`: {scheme.algorithm} of `{scheme.signed_content}`, {scheme.encoding}"
    if preset.hmac is not None:
        return _hmac(preset.hmac)
    return _KINDS.get(preset.verifier, "everything from `[routes.hmac]`")


def _hmac(scheme: HmacScheme) -> str:
    header = " or ".join(f"`{h}`" for h in scheme.signature_headers)
    shape = ""
    if scheme.signature_format == "pairs":
        sep = scheme.pair_separator
        shape = f" as `{scheme.timestamp_key}=...{sep}{scheme.signature_key}=...`"
    elif scheme.signature_prefix:
        shape = f" after `{scheme.signature_prefix}`"
    return f"{header}{shape}: HMAC-{scheme.algorithm.upper()} of `{scheme.signed_content}`, {scheme.encoding}"


def _tolerance(name: str, preset: Preset) -> str:
    if name == "hmac":
        return "`tolerance_seconds` (300 s) when a timestamp is signed"
    stamped = (
        preset.asymmetric is not None
        or preset.verifier in ("standard-webhooks", "mailgun")
        or (
            preset.hmac is not None
            and (preset.hmac.uses("timestamp") or preset.hmac.timestamp_header or preset.hmac.timestamp_body)
        )
    )
    if not stamped:
        return "none signed"
    return f"{int(preset.tolerance or DEFAULT_TOLERANCE_SECONDS)} s"


def _source(preset: Preset, field: str) -> str:
    value = preset.defaults.get(field)
    if value is None:
        return "route sets it"
    return f"`{value}`" + (" per item" if preset.items is not None else "")


def table() -> str:
    """The markdown table: one row per preset, in name order."""
    rows = ["| scheme | signature | key | type | tolerance | handshake |", "|---|---|---|---|---|---|"]
    for name in sorted(PRESETS):
        preset = PRESETS[name]
        rows.append(
            f"| `{name}` | {_signature(preset)} | {_source(preset, 'event_key')} | {_source(preset, 'event_type')} "
            f"| {_tolerance(name, preset)} | {preset.handshake or '-'} |".replace(
                "{timestamp}|{body}", "{timestamp}\\|{body}"
            )
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
