"""What deploy/kubernetes/ promises beyond its schema (make deploy-check validates that): probes, a read-only
root, a non-root user matching the image's, secrets only from Secret objects, a migration before serving."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy/kubernetes"


def _documents() -> list[dict[str, Any]]:
    return [doc for path in sorted(MANIFESTS.glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text()) if doc]


def _deployments() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in _documents() if doc["kind"] == "Deployment"}


def _image_user() -> int:
    match = re.search(r"^USER (\d+):\d+$", (ROOT / "Containerfile").read_text(), re.MULTILINE)
    assert match, "the Containerfile names its user by number (runAsNonRoot can only check a number)"
    return int(match.group(1))


def test_manifests_deploy_inboxd_and_the_edge_with_services_budgets_and_policies() -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in _documents()}
    for name in ("inboxd", "inboxd-edge"):
        assert {
            ("Deployment", name),
            ("Service", name),
            ("PodDisruptionBudget", name),
            ("NetworkPolicy", name),
        } <= kinds


@pytest.mark.parametrize("name", ["inboxd", "inboxd-edge"])
def test_every_container_runs_as_the_images_user_on_a_read_only_root(name: str) -> None:
    pod = _deployments()[name]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _image_user()
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["capabilities"]["drop"] == ["ALL"], container["name"]


@pytest.mark.parametrize("name", ["inboxd", "inboxd-edge"])
def test_every_server_has_readiness_and_liveness_probes(name: str) -> None:
    for container in _deployments()[name]["spec"]["template"]["spec"]["containers"]:
        assert "readinessProbe" in container and "livenessProbe" in container, container["name"]


def test_secrets_come_only_from_secret_objects() -> None:
    for deployment in _deployments().values():
        pod = deployment["spec"]["template"]["spec"]
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            for variable in container.get("env", []):
                assert not re.search(r"TOKEN$|SECRET|PASSWORD|DATABASE_URL", variable["name"]), variable
    inboxd = _deployments()["inboxd"]["spec"]["template"]["spec"]
    assert {"secretRef": {"name": "inboxd-database"}} in inboxd["containers"][0]["envFrom"]
    assert {"name": "tokens", "secret": {"secretName": "inboxd-tokens", "defaultMode": 0o440}} in inboxd["volumes"]


def test_inboxd_migrates_before_it_serves() -> None:
    [migrate] = _deployments()["inboxd"]["spec"]["template"]["spec"]["initContainers"]
    assert migrate["command"] == ["inboxd", "migrate"]
