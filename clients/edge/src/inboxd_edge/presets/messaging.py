"""Messages, mail and voice: Twilio and the others that deliver to people."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # Twilio signs the public URL it called and the sorted form fields (twilio_signature.py); nothing else.
    # MessageSid (SmsSid is its old name, same value) names one message across retries. Twilio sends no
    # type: a route sets event_type (const:message.received; status callbacks: body:MessageStatus with
    # key_includes_type, so each status of one message is its own event). The idempotency token names
    # an attempt, unsigned: metadata only.
    "twilio": Preset(
        "twilio",
        defaults={"event_key": "body:MessageSid", "delivery_id": "header:I-Twilio-Idempotency-Token"},
    ),
}
