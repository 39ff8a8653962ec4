"""Chat and platform apps: Slack and the others whose apps subscribe to events, each with its URL check."""

from __future__ import annotations

from collections.abc import Mapping

from inboxd_edge.hmac_template import HmacScheme
from inboxd_edge.presets.base import Preset

PRESETS: Mapping[str, Preset] = {
    # Slack: "v0=" + hex HMAC-SHA256 of "v0:{X-Slack-Request-Timestamp}:{body}", the timestamp held to the
    # route's tolerance (Slack's own advice is 5 minutes). The defaults fit a slash command's form: trigger_id
    # is minted once per invocation and the command names what was asked. An Events API route (JSON) sets
    # event_key = "body:/event_id" and event_type = "body:/event/type" instead.
    "slack": Preset(
        "hmac",
        HmacScheme(
            signature_headers=("X-Slack-Signature",),
            timestamp_header="X-Slack-Request-Timestamp",
            signed_content="v0:{timestamp}:{body}",
            signature_prefix="v0=",
        ),
        defaults={"event_key": "body:trigger_id", "event_type": "body:command"},
        tolerance=300,
    ),
}
