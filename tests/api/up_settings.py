"""Settings for the ``manage.py up`` test of tests/api/test_server_errors.py: Markus's
own settings (LOGGING included) with one URL that fails."""

from markus.settings import *  # noqa: F403

ROOT_URLCONF = "tests.api.up_urls"
