"""Characters a terminal, a pager or `cat` would act on rather than show, and their escapes.

Any caller can put them in an event type, a worker id, an error or a
namespace; the logs and the operators' command line print them as escapes,
never raw, through the functions here.
"""

from __future__ import annotations

import re

# C0 controls (ESC, CR, LF, NUL...), DEL, C1 controls (8-bit CSI), line and
# paragraph separators, the invisible marks that reorder or hide text (bidi
# overrides, zero-width characters), and lone surrogates.
UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]"
)


def escape_unprintable(text: str, *, keep: str = "") -> str:
    """`text` with every unprintable character but those in `keep` as a \\uXXXX escape (valid inside JSON too)."""
    return UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else f"\\u{ord(m.group()):04x}", text)
