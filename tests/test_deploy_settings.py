"""Production settings (issue 11, item 6): the embedded default key only for a local
setup, HTTPS hardening from the environment, `check --deploy` clean, and an OpenAPI
description without duplicate operation ids.

Settings are read once per process, so each environment runs ``manage.py`` in a
subprocess with the production settings module (not the test one).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_VARS = (
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "MARKUS_ENV",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_SSL_REDIRECT",
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER",
    "CSRF_TRUSTED_ORIGINS",
    "MARKUS_DB_PREPARE",
)
PRODUCTION = {
    "MARKUS_ENV": "production",
    "DEBUG": "false",
    "ALLOWED_HOSTS": "markus.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://markus.example.com",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SECURE_SSL_REDIRECT": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto,https",
}


def manage(tmp_path: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
    env.update(
        DJANGO_SETTINGS_MODULE="markus.settings",
        MARKUS_DATA_DIR=str(tmp_path),
        DATABASE_URL=f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
    )
    env.update(env_vars)
    env.pop("REDIS_URL", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def strong_key() -> str:
    return secrets.token_urlsafe(50)


def test_check_deploy_is_clean_in_a_production_environment(tmp_path):
    run = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", SECRET_KEY=strong_key(), **PRODUCTION)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no issues" in run.stdout


def test_the_hardening_settings_come_from_the_environment(tmp_path):
    code = (
        "import json; from django.conf import settings as s; print(json.dumps([s.SECURE_HSTS_SECONDS, "
        "s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_PROXY_SSL_HEADER, s.DEBUG]))"
    )
    run = manage(tmp_path, "shell", "--no-imports", "-c", code, SECRET_KEY=strong_key(), **PRODUCTION)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [
        31536000,
        True,
        True,
        True,
        True,
        True,
        ["HTTP_X_FORWARDED_PROTO", "https"],
        False,
    ]
    local = manage(tmp_path, "shell", "--no-imports", "-c", code)
    assert json.loads(local.stdout) == [0, False, False, False, False, False, None, False]


@pytest.mark.parametrize(
    "env",
    [
        {"MARKUS_ENV": "production"},
        {"MARKUS_ENV": "production", "SECRET_KEY": ""},
        {"ALLOWED_HOSTS": "markus.example.com"},
        {"ALLOWED_HOSTS": "127.0.0.1,*"},
        {"ALLOWED_HOSTS": "markus.example.com", "DEBUG": "true"},
        {"MARKUS_ENV": "production", "SECRET_KEY": "markus-dev-insecure-key-change-me"},
    ],
)
def test_production_refuses_to_start_with_the_default_secret_key(tmp_path, env):
    run = manage(tmp_path, "check", **env)
    assert run.returncode != 0
    assert "ImproperlyConfigured" in run.stderr and "SECRET_KEY" in run.stderr
    assert "set secret_key in the environment" in run.stderr.lower()


def test_a_bad_proxy_header_setting_is_refused_with_a_message(tmp_path):
    run = manage(tmp_path, "check", SECURE_PROXY_SSL_HEADER="https")
    assert run.returncode != 0 and "SECURE_PROXY_SSL_HEADER" in run.stderr


@pytest.mark.parametrize("env", [{}, {"ALLOWED_HOSTS": "localhost,127.0.0.1,[::1]"}, {"DEBUG": "true"}])
def test_the_embedded_default_runs_without_configuration(tmp_path, env):
    run = manage(tmp_path, "check", **env)
    assert run.returncode == 0, run.stderr


def test_a_production_key_from_the_environment_is_used(tmp_path):
    key = strong_key()
    run = manage(
        tmp_path,
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.SECRET_KEY)",
        SECRET_KEY=key,
        **PRODUCTION,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == key


@pytest.mark.django_db
def test_the_openapi_description_has_no_duplicate_operation_ids_and_no_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--fail-on-warn", "--file", str(target))
    schema = yaml.safe_load(target.read_text())
    ids = Counter(
        op["operationId"]
        for ops in schema["paths"].values()
        for op in ops.values()
        if isinstance(op, dict) and "operationId" in op
    )
    assert [name for name, n in ids.items() if n > 1] == []
    assert len(ids) >= 40


@pytest.mark.parametrize(("prepare", "threshold"), [(None, 5), ("false", None), ("true", 5)])
def test_prepared_statements_on_postgresql_can_be_turned_off_for_a_pooler(tmp_path, prepare, threshold):
    """The take and the fenced claim are prepared statements on PostgreSQL (Django's own
    queries never are); behind a pooler that cannot keep them, MARKUS_DB_PREPARE=false."""
    code = "from django.conf import settings as s; print(s.DATABASES['default']['OPTIONS'].get('prepare_threshold'))"
    env = {"DATABASE_URL": "postgres://markus@127.0.0.1/markus"}  # read, never connected to
    if prepare is not None:
        env["MARKUS_DB_PREPARE"] = prepare
    run = manage(tmp_path, "shell", "--no-imports", "-c", code, **env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(threshold)
