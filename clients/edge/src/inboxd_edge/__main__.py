"""`python -m inboxd_edge`: the same as the `inboxd-edge` command."""

from __future__ import annotations

import sys

from inboxd_edge.cli import main

sys.exit(main())
