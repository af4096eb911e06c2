"""``runtime/dashboard.py`` by hand, without Ray: the token goes in the header a Ray 2.60
dashboard reads, an HTTP refusal comes back as an answer, nothing listening is named with the
fix. (A real dashboard answers these requests in notebook 07, section 7, under nbval.)"""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from rlkit.distributed.runtime.cluster import free_local_port
from rlkit.distributed.runtime.dashboard import DashboardAnswer, ask_dashboard, auth_token


class _TokenChecking(BaseHTTPRequestHandler):
    """Answers as Ray's dashboard does with token authentication on: health checks to anyone,
    the rest only with ``Authorization: Bearer <token>``."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        authorised = self.headers.get("Authorization") == "Bearer s3cret"
        if self.path == "/api/gcs_healthz" or authorised:
            status, body = 200, b'{"ray_version": "2.60.0"}'
        else:
            status, body = 401, b"Unauthorized: Missing authentication token"
        self.send_response(status)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_dashboard():
    server = HTTPServer(("127.0.0.1", 0), _TokenChecking)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_token_is_sent_as_a_bearer_header(fake_dashboard, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "s3cret")
    answer = ask_dashboard(fake_dashboard, "/api/version")
    assert answer == DashboardAnswer(200, '{"ray_version": "2.60.0"}')
    assert answer.json() == {"ray_version": "2.60.0"}
    assert ask_dashboard(f"http://{fake_dashboard}/", "/api/version").status == 200


def test_without_the_token_only_the_health_check_answers(fake_dashboard, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "s3cret")
    assert ask_dashboard(fake_dashboard, "/api/gcs_healthz", with_token=False).status == 200
    refused = ask_dashboard(fake_dashboard, "/api/version", with_token=False)
    assert refused.status == 401 and "Missing authentication token" in refused.body
    monkeypatch.setenv("RAY_AUTH_TOKEN", "wrong")
    assert ask_dashboard(fake_dashboard, "/api/version").status == 401


def test_the_token_is_read_as_ray_reads_it(tmp_path, monkeypatch):
    """``RAY_AUTH_TOKEN`` first, else the file (``RAY_AUTH_TOKEN_PATH``), else none."""
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "auth_token"))
    assert auth_token() is None
    (tmp_path / "auth_token").write_text("from-the-file\n")
    assert auth_token() == "from-the-file"
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-the-environment")
    assert auth_token() == "from-the-environment"


def test_nothing_listening_is_named_with_the_fix():
    port = free_local_port()
    with pytest.raises(ConnectionError, match=rf"No Ray dashboard answers at http://127.0.0.1:"
                                              rf"{port} .*include_dashboard=True"):
        ask_dashboard(f"127.0.0.1:{port}", "/api/version", timeout_s=2.0)
