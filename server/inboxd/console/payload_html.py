"""A payload on the console's event page, in the shape its content type names (domain/payload_display).

JSON pretty-printed, text and hex in a <pre>, a form as a table of its
fields; the content type, the size and any note above or below. Every piece
of the payload passes through `h`: a payload is the most hostile text the
console shows.
"""

from __future__ import annotations

from inboxd.console.html import h, table
from inboxd.domain.payload_display import PayloadDisplay, Shape, display_payload
from inboxd.domain.validation import DEFAULT_CONTENT_TYPE

_SHOWN_AS = {
    Shape.JSON: "JSON, pretty-printed",
    Shape.FORM: "form fields, in order",
    Shape.TEXT: "text",
    Shape.HEX: "hex",
}


def content_type_code(content_type: str) -> str:
    return f'<code class="content-type">{h(content_type or DEFAULT_CONTENT_TYPE)}</code>'


def payload_html(payload: bytes | None, content_type: str, caption: str = "Form fields") -> str:
    """The payload laid out by its content type, under a line naming the type, the size and the shape."""
    if payload is None:
        return '<p class="empty">Dropped by payload retention.</p>'
    shown = display_payload(payload, content_type)
    about = (
        f'<p class="payload-about">{content_type_code(shown.content_type)} · {shown.size:,} bytes'
        f" · shown as {_SHOWN_AS[shown.shape]}</p>"
    )
    note = f'<p class="payload-note">{h(shown.note.capitalize())}.</p>' if shown.note else ""
    return f'<div class="payload-view">{about}{_body(shown, caption)}{note}</div>'


def _body(shown: PayloadDisplay, caption: str) -> str:
    if shown.shape is Shape.FORM:
        rows = ([h(name), h(value)] for name, value in shown.fields)
        return table(caption, ("Name", "Value"), rows, empty="No fields.")
    if not shown.text:
        return '<p class="empty">Empty.</p>'
    return f'<pre class="payload payload-{shown.shape.value}" tabindex="0">{h(shown.text)}</pre>'
