#!/usr/bin/env bash
# Install and start what the tests need: PostgreSQL, Redis, Chromium. Idempotent.
set -euo pipefail
need=()
command -v pg_ctlcluster >/dev/null || need+=(postgresql)
command -v redis-server >/dev/null || need+=(redis-server)
command -v chromium >/dev/null || need+=(chromium)
# Emoji glyphs for the registry icons in the mind view screenshots.
dpkg -s fonts-noto-color-emoji >/dev/null 2>&1 || need+=(fonts-noto-color-emoji)
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
ver=$(ls /etc/postgresql | sort -n | tail -1)
pg_ctlcluster --skip-systemctl-redirect "$ver" main start 2>/dev/null || true
for _ in $(seq 1 30); do su postgres -c 'pg_isready -q' && break; sleep 1; done
su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname='root'\"" | grep -q 1 \
  || su postgres -c 'createuser -s root'
psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='markus'" | grep -q 1 \
  || createdb markus
redis-cli ping >/dev/null 2>&1 || redis-server --daemonize yes --save '' --appendonly no
for _ in $(seq 1 30); do redis-cli ping >/dev/null 2>&1 && break; sleep 0.5; done
