#!/usr/bin/env bash
# `make deploy-check`: each deployment file under deploy/ checked by its own tool.
# (deploy/grafana/inboxd.json and the metric names the rules read are checked against
# a running server's /metrics by tests/integration/test_deploy_metrics.py.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-deploy-tools.sh
scripts/check-systemd-units.sh deploy/systemd/inboxd.service deploy/systemd/inboxd-edge.service
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
.venv/bin/hadolint Containerfile deploy/postgres/Containerfile
# Kubernetes' own OpenAPI schemas (bundled with kubernetes-validate: no cluster, no network), strict: an unknown
# field fails too. 1.30: the oldest release the manifests promise (grpc probes are GA since 1.27).
.venv/bin/kubernetes-validate --strict --quiet -k 1.30.0 deploy/kubernetes/*.yaml
.venv/bin/kubernetes-validate --strict --quiet deploy/kubernetes/*.yaml
echo "deploy/kubernetes valid against Kubernetes 1.30 and $(.venv/bin/kubernetes-validate --version | cut -d' ' -f1-)'s newest schemas"
