"""The version an operator can read: `inboxd --version`, `inboxd-edge --version`, health's trailer, the build metric."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import inboxd
import inboxd_client
import inboxd_edge
from inboxd.serving.cli import main as inboxd_main
from inboxd.serving.server import VERSION_TRAILER, RunningServer, start_server
from inboxd.store.database import Database
from inboxd_edge.cli import main as edge_main
from tests.conftest import CLOCKED_SETTINGS
from tests.integration.test_metrics import scrape, value


def test_inboxd_version_prints_the_servers_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        inboxd_main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"inboxd {inboxd.__version__}\n"


def test_inboxd_edge_version_prints_the_edges_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        edge_main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"inboxd-edge {inboxd_edge.__version__}\n"


def test_the_three_python_packages_release_together() -> None:
    assert inboxd.__version__ == inboxd_client.__version__ == inboxd_edge.__version__


@pytest.fixture(scope="module")
async def metered(db: Database) -> AsyncIterator[RunningServer]:
    running = await start_server(replace(CLOCKED_SETTINGS, metrics_listen="127.0.0.1:0"), db)
    yield running
    await running.stop(1.0)


async def test_a_health_check_names_the_running_version_in_its_trailer(metered: RunningServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{metered.port}") as channel:
        call = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""))
        answer = await call
        trailers = dict(await call.trailing_metadata() or ())
    assert answer.status == health_pb2.HealthCheckResponse.SERVING
    assert trailers[VERSION_TRAILER] == inboxd.__version__


async def test_metrics_export_the_build_info(metered: RunningServer) -> None:
    samples = await scrape(metered)
    assert value(samples, "inboxd_build_info", version=inboxd.__version__) == 1
