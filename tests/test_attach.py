"""init_ray() and RAY_ADDRESS: an address that does not answer, a cluster that wants a token
the process lacks, and a cluster that `ray start` left on the machine, each handled at once.

The tests that start Ray do it in their own processes (a `ray start --head` in its own process
group, and child interpreters calling init_ray), so they leave this pytest process's Ray state
alone and work whatever Ray session earlier tests left open. A finalizer stops the head's
processes and checks that none of them, nor of the children's instances, is left running."""

import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from rlkit.distributed.runtime import cluster
from rlkit.distributed.runtime.cluster import ATTACH_TIMEOUT_S, free_local_port, init_ray

ROOT = Path(__file__).resolve().parents[1]
#: Slack on top of a deadline for a loaded 2-core machine.
MARGIN_S = 2.0
#: The variables that decide how a process authenticates to Ray; the tests set them.
AUTH_VARS = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@pytest.fixture
def no_ray_session():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("an earlier test left a Ray session open; init_ray would reuse it")
    yield
    assert not ray.is_initialized()


def _init_ray_raises(monkeypatch, address: str, error: type[Exception]) -> tuple[str, float]:
    monkeypatch.setenv("RAY_ADDRESS", address)
    start = time.monotonic()
    with pytest.raises(error) as caught:
        init_ray()
    return str(caught.value), time.monotonic() - start


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_nothing_listens_fails_at_once_naming_ray_address(
        monkeypatch, no_ray_session, scheme):
    address = f"{scheme}127.0.0.1:{free_local_port()}"
    message, elapsed = _init_ray_raises(monkeypatch, address, ConnectionError)
    assert elapsed < ATTACH_TIMEOUT_S + MARGIN_S
    assert f"RAY_ADDRESS={address!r}" in message
    assert "ray start --head" in message and "unset RAY_ADDRESS" in message


def test_a_malformed_address_names_the_forms(monkeypatch, no_ray_session):
    message, _ = _init_ray_raises(monkeypatch, "head-node", ValueError)
    assert "RAY_ADDRESS='head-node'" in message and "host:port" in message


@pytest.fixture
def listening_port():
    """A port that accepts TCP connections and never answers (not a Ray GCS)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def accept() -> None:
        try:
            while True:
                accepted.append(server.accept()[0])
        except OSError:  # closed
            pass

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in accepted:
        conn.close()


def test_a_ray_client_address_without_ray_client_names_the_fix(
        monkeypatch, no_ray_session, listening_port):
    """On an install of plain ``ray`` (no grpcio: ``ray[default]``, which this project pins,
    brings it, so its absence is simulated here)."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "grpc" else find_spec(name, *a))
    message, elapsed = _init_ray_raises(monkeypatch, f"ray://127.0.0.1:{listening_port}",
                                        ImportError)
    assert elapsed < MARGIN_S
    assert 'pip install "ray[client]==2.60.0"' in message
    assert "RAY_ADDRESS=127.0.0.1:6379" in message  # the other way: the GCS port


def test_a_token_refusal_is_recognised_inside_ray_inits_wrapped_error():
    """ray.init reports the refusal as text inside a RuntimeError inside a ConnectionError."""
    try:
        try:
            raise RuntimeError("Failed to connect to GCS. Last connection error: Traceback ...\n"
                               "ray.exceptions.AuthenticationError: RPC error: "
                               "InvalidAuthToken: Authentication token is missing")
        except RuntimeError as inner:
            raise ConnectionError("Failed to connect to Ray cluster at 1.2.3.4:6379") from inner
    except ConnectionError as err:
        assert cluster._refused_token(err)
    assert not cluster._refused_token(ConnectionError("Failed to connect to Ray cluster"))


def test_the_token_message_names_the_mode_and_every_place_for_the_token(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    message = cluster.token_error_message("RAY_ADDRESS='head:6379'")
    for part in ("RAY_ADDRESS='head:6379'", "token authentication", "RAY_AUTH_MODE=None",
                 "sent no token", "RAY_AUTH_MODE=token", "RAY_AUTH_TOKEN,",
                 "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token"):
        assert part in message, part


# --- with real Ray processes, each in a process of its own ------------------------------

CHILD = r"""
import json, os, sys, time
import ray
from rlkit.distributed.runtime import cluster
cluster.ATTACH_TIMEOUT_S = float(sys.argv[1])
results = []
for env in json.loads(sys.argv[2]):
    os.environ.update(env)
    start = time.monotonic()
    try:
        resources = cluster.init_ray(num_cpus=1)
        results.append({"cpu": resources.get("CPU"),
                        "gcs": ray.get_runtime_context().gcs_address})
        ray.shutdown()
    except Exception as err:
        results.append({"error": type(err).__name__, "message": str(err)})
    results[-1]["elapsed"] = time.monotonic() - start
print("RESULTS " + json.dumps(results))
"""


def _child_init_ray(env: dict[str, str], *attempts: dict[str, str],
                    timeout_s: float = ATTACH_TIMEOUT_S) -> list[dict]:
    """Run init_ray in a fresh interpreter, once per attempt (each updating os.environ)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(timeout_s), json.dumps(attempts)], cwd=ROOT,
        env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULTS ")]
    assert lines, f"child failed ({done.returncode}): {done.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULTS "):])


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in AUTH_VARS}
    return {**env, "RAY_USAGE_STATS_ENABLED": "0", **extra}


def _processes_of(tmpdir: str, head: psutil.Process | None) -> list[psutil.Process]:
    """Live processes of a head (its descendants: workers leave its process group) and of
    any instance that used ``tmpdir`` as RAY_TMPDIR."""
    found = {}
    if head is not None:
        try:
            found = {p.pid: p for p in [head, *head.children(recursive=True)]}
        except psutil.NoSuchProcess:
            pass
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if (tmpdir in " ".join(proc.info["cmdline"] or [])
                    or proc.environ().get("RAY_TMPDIR") == tmpdir):
                found[proc.pid] = proc
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return [p for p in found.values() if _alive(p)]


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="module")
def token_head():
    """A `ray start --head` (no CPU: no worker to start) that requires a token, in its own
    process group and with its own RAY_TMPDIR; afterwards none of its processes is left."""
    pytest.importorskip("ray")
    tmpdir = tempfile.mkdtemp(prefix="rka", dir="/tmp")  # short: Ray's socket paths
    token, port = secrets.token_hex(32), free_local_port()
    ray_cli = str(Path(sys.executable).parent / "ray")
    with open(Path(tmpdir) / "head.log", "w") as log:  # the head keeps its own copy
        head = subprocess.Popen(
            [ray_cli, "start", "--head", "--block", f"--port={port}", "--num-cpus=0",
             "--include-dashboard=false", "--object-store-memory=100000000"],
            env=_clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_TMPDIR=tmpdir),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc = psutil.Process(head.pid)
    try:
        # up once `ray start` records it for `ray.init()` to find (as in /tmp/ray otherwise)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and head.poll() is None:
            if (Path(tmpdir) / "ray" / "ray_current_cluster").exists():
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"ray start --head was not up within 30 s: "
                        f"{(Path(tmpdir) / 'head.log').read_text()[-2000:]}")
        yield {"port": port, "token": token, "tmpdir": tmpdir, "process": proc}
    finally:
        # `ray start --block` stops its processes on SIGTERM (about 3 s here); what is left
        # after 15 s is killed: first its process group, then its descendants outside it
        ours = _processes_of(tmpdir, proc)
        head.terminate()
        _, alive = psutil.wait_procs(ours, timeout=15)
        if alive:
            try:
                os.killpg(head.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for p in alive:
                try:
                    p.kill()
                except psutil.NoSuchProcess:
                    pass
        head.wait(timeout=15)
        deadline = time.monotonic() + 5
        while (left := _processes_of(tmpdir, None)) and time.monotonic() < deadline:
            time.sleep(0.2)
        shutil.rmtree(tmpdir, ignore_errors=True)
        assert not alive, f"SIGTERM did not stop them in 15 s, SIGKILL did: {alive}"
        assert not left, f"processes of the test head left running: {left}"


@pytest.mark.ray
def test_a_cluster_that_wants_a_token_is_explained_at_once_and_the_fix_works(token_head):
    """No token sent, then a wrong one: refused at once with the fix; then the fix made in
    os.environ of the same process attaches."""
    address = f"127.0.0.1:{token_head['port']}"
    refused, wrong, fixed = _child_init_ray(
        _clean_env(RAY_ADDRESS=address),
        {},  # no RAY_AUTH_MODE: Ray sends no token
        {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64},
        {"RAY_AUTH_TOKEN": token_head["token"]})  # the fix, in the same process
    for result in (refused, wrong):
        assert result.get("error") == "ConnectionError", result
        assert f"RAY_ADDRESS={address!r}" in result["message"]
        assert "requires token authentication" in result["message"]
        assert "RAY_AUTH_MODE=token" in result["message"] and "RAY_AUTH_TOKEN" in result["message"]
        assert result["elapsed"] < ATTACH_TIMEOUT_S, result  # Ray alone: 20 s, then no reason
    assert "sent no token" in refused["message"]
    assert "gcs" in fixed, fixed
    assert fixed["gcs"].endswith(f":{token_head['port']}")


@pytest.mark.ray
def test_an_address_that_is_not_a_ray_gcs_fails_within_the_timeout(listening_port):
    (result,) = _child_init_ray(_clean_env(RAY_ADDRESS=f"127.0.0.1:{listening_port}"), {},
                                timeout_s=1.0)
    assert result.get("error") == "ConnectionError", result
    assert "no Ray GCS answers" in result["message"] and "RAY_ADDRESS=" in result["message"]
    assert result["elapsed"] < 1.0 + MARGIN_S


@pytest.mark.ray
def test_without_ray_address_init_ray_starts_its_own_instance_not_the_stray_one(token_head):
    """`ray start` left a cluster here (recorded in RAY_TMPDIR, as `ray.init()` would find it)
    and its token is at hand, so plain `ray.init()` would join it; init_ray must not."""
    (result,) = _child_init_ray(
        _clean_env(RAY_TMPDIR=token_head["tmpdir"], RAY_AUTH_TOKEN=token_head["token"]), {})
    assert "gcs" in result, result
    assert not result["gcs"].endswith(f":{token_head['port']}")  # not the stray cluster
    assert result["cpu"] == 1.0  # num_cpus=1, where the stray head has no CPU
    head = token_head["process"]
    deadline = time.monotonic() + 15  # the child's instance goes with the child
    while (left := [p for p in _processes_of(token_head["tmpdir"], None) if p.pid not in
                    {head.pid, *(c.pid for c in head.children(recursive=True))}]) \
            and time.monotonic() < deadline:
        time.sleep(0.3)
    assert not left, f"the child's Ray instance left processes: {left}"


@pytest.mark.parametrize("runtime_env, named", [
    ("working_dir=.", r"runtime_env='working_dir=\.' must be a dict"),
    ({"env_vars": {"OMP_NUM_THREADS": 1}}, r"runtime_env\['env_vars'\].*Fix: quote the values"),
])
def test_a_bad_runtime_env_is_named_before_ray_starts(runtime_env, named):
    """Checked first, so no Ray instance starts (or is touched) for a bad one."""
    with pytest.raises(ValueError, match=named):
        init_ray(runtime_env=runtime_env)


RUNTIME_ENV_CHILD = r"""
import os, ray
from rlkit.distributed.runtime.cluster import init_ray
init_ray(num_cpus=1, runtime_env={"env_vars": {"RLKIT_PROBE": "on every worker"}})
try:
    init_ray(runtime_env={"env_vars": {}})
except ValueError as err:
    print("AGAIN", err)
print("WORKER", ray.get(ray.remote(lambda: os.environ.get("RLKIT_PROBE")).remote()))
ray.shutdown()
"""


@pytest.mark.ray
def test_runtime_env_reaches_every_worker_and_cannot_change_once_attached():
    """What notebook 07's real-cluster tips pass (env_vars such as GLOO_SOCKET_IFNAME) is set
    in the workers; a second init_ray with another runtime_env is refused, not ignored."""
    done = subprocess.run([sys.executable, "-c", RUNTIME_ENV_CHILD], cwd=ROOT,
                          env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert "WORKER on every worker" in done.stdout, done.stderr[-3000:]
    assert "AGAIN runtime_env was given, but Ray is already initialized" in done.stdout
