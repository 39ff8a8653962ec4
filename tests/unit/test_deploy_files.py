"""The systemd units are hardened as docs/deployment.md says, and their checker catches a broken one."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = {"inboxd.service": "inboxd", "inboxd-edge.service": "inboxd-edge"}
CHECK = ROOT / "scripts/check-systemd-units.sh"


def _service_section(unit: Path) -> dict[str, list[str]]:
    """[Service]'s keys and their values in order (a key may repeat, as SystemCallFilter does)."""
    keys: dict[str, list[str]] = {}
    section = ""
    for line in (raw.strip() for raw in unit.read_text().splitlines()):
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


@pytest.mark.parametrize(("name", "user"), UNITS.items())
def test_each_unit_runs_as_its_own_user_hardened_with_raised_descriptors_and_restarts(name: str, user: str) -> None:
    service = _service_section(ROOT / "deploy/systemd" / name)
    assert service["User"] == [user] and service["Group"] == [user]
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["ProtectSystem"] == ["strict"]
    assert service["CapabilityBoundingSet"] == [""]
    assert int(service["LimitNOFILE"][0]) >= 65536
    assert service["Restart"] == ["on-failure"]
    assert service["KillSignal"] == ["SIGTERM"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian's systemd)")
def test_the_checker_passes_the_units_and_fails_a_typo_and_a_softened_unit(tmp_path: Path) -> None:
    units = [str(ROOT / "deploy/systemd" / name) for name in UNITS]
    assert subprocess.run([str(CHECK), *units], capture_output=True, check=False).returncode == 0
    text = (ROOT / "deploy/systemd/inboxd.service").read_text()
    for broken in (
        text.replace("ProtectSystem=strict", "ProtectSystm=strict"),  # an unknown key is only a warning to systemd
        text.replace("Restart=on-failure", "Restart=sometimes"),
        "\n".join(line for line in text.splitlines() if not line.startswith(("Protect", "Private", "Restrict"))),
    ):
        unit = tmp_path / "inboxd.service"
        unit.write_text(broken)
        done = subprocess.run([str(CHECK), str(unit)], capture_output=True, text=True, check=False)
        assert done.returncode != 0, broken
