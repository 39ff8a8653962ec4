"""What the edge stores with an event so that its provider's signature can be verified again from Claim alone.

The payload is the body as it arrived and ``content_type`` its
``Content-Type``; beside them, in the event's metadata, every header the
route's signature check read (signature, timestamp, id), each under
``inboxd.signature.<header, lowercase>``, and for a scheme that signs the URL
(Twilio) the public URL it signed, under ``inboxd.signature.url``. A worker or
an auditor then runs the provider's own verifier on exactly what the provider
signed. None of it is secret: a signature proves the sender knew the secret
and reveals nothing of it.

A route with ``payload_drop`` forwards a trimmed body, which no longer matches
its signature: such an event carries no signature inputs, rather than inputs
that cannot verify.
"""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.signatures import Verifier, header_value

PREFIX = "inboxd.signature."
URL_KEY = PREFIX + "url"


def signature_metadata(verifier: Verifier, headers: Mapping[str, str], url: str) -> dict[str, str]:
    """The metadata entries that let the delivery's signature be checked again: the inputs it carried."""
    entries = {
        PREFIX + name: value for name in verifier.input_headers if (value := header_value(headers, name)) is not None
    }
    if verifier.signs_url:
        entries[URL_KEY] = url
    return entries
