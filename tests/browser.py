"""The live server and the browser, for every test marked ``browser`` (pages, the mind
view, the admin): one daphne per test session (Twisted's reactor runs once per
process), the system Chromium through Playwright. Loaded by tests/conftest.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# ------------------------------------------------------------------ live server (browser)


class ThreadedDaphne:
    """daphne.server.Server on 127.0.0.1 (a free port) in a daemon thread.

    Twisted's reactor runs once per process, so there is one server per test session.
    """

    def __init__(self) -> None:
        from daphne.server import Server

        from markus.asgi import application

        self.ready = threading.Event()
        self.server = Server(
            application,
            endpoints=["tcp:port=0:interface=127.0.0.1"],
            signal_handlers=False,
            ready_callable=self.ready.set,
            verbosity=0,
        )
        self.thread = threading.Thread(target=self.server.run, name="daphne", daemon=True)

    def start(self) -> ThreadedDaphne:
        import time

        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.listening_addresses:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("daphne did not start listening")
            time.sleep(0.02)
        host, port = self.server.listening_addresses[0]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(reactor.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def daphne_server(django_db_setup, django_db_blocker):
    server = ThreadedDaphne().start()
    yield server
    server.stop()


@pytest.fixture
def chromium_path() -> str:
    """The system Chromium (Playwright's own browser download does not work here). A
    missing one fails the test, under CI and elsewhere: .ci/services.sh installs it."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (CI={os.environ.get('CI', '')})")
    return CHROMIUM


@pytest.fixture
def browser(chromium_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the ORM calls the test
    # makes between page actions are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def test_output() -> Path:
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    return out
