"""What a process writes about its live Work streams: one row per worker and what it covers, streams and held summed."""

from __future__ import annotations

from inboxd.background.presence import presence_rows
from inboxd.domain.presence import Coverage, PresenceRow
from inboxd.usecases.streams import LiveStream


def test_streams_become_one_row_per_worker_and_target_with_their_streams_and_held_events_summed() -> None:
    streams = [
        LiveStream("w1", "worker-a", ("shop/a", "shop/b"), 2),
        LiveStream("w1", "worker-a", ("shop/a",), 3),
        LiveStream("w2", "worker-a", (), 1, ("tenant-a/%",)),
        LiveStream("w3", "root", (), 0),
        LiveStream("w3", "root", (), 4),
    ]
    assert sorted(presence_rows(streams), key=lambda r: (r.worker_id, r.target)) == [
        PresenceRow("w1", Coverage.NAMESPACE, "shop/a", 2, 5),
        PresenceRow("w1", Coverage.NAMESPACE, "shop/b", 1, 2),
        PresenceRow("w2", Coverage.PATTERN, "tenant-a/%", 1, 1),
        PresenceRow("w3", Coverage.EVERY, "", 2, 4),
    ]


def test_no_streams_is_no_rows() -> None:
    assert presence_rows([]) == []
