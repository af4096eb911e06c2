"""Safe by default: JupyterLab listens on localhost only; a local Ray instance started by
rlkit keeps token authentication on and its token private."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _listening_addresses(pid: int) -> set[str]:
    procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
    ours = {p.pid for p in procs}
    return {c.laddr.ip for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in ours}


@pytest.mark.skipif(shutil.which("jupyter", path=str(Path(sys.executable).parent)) is None,
                    reason="JupyterLab is not installed")
def test_jupyterlab_as_make_lab_starts_it_listens_on_localhost_only(tmp_path):
    jupyter = str(Path(sys.executable).parent / "jupyter")
    # the same command as `make lab`, with a free port and no browser
    command = [jupyter, "lab", "notebooks/", "--no-browser", "--port=18931",
               "--ServerApp.port_retries=50", f"--ServerApp.runtime_dir={tmp_path}"]
    if os.getuid() == 0:
        command.append("--allow-root")
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        addresses: set[str] = set()
        deadline = time.monotonic() + 60
        while not addresses and time.monotonic() < deadline and server.poll() is None:
            time.sleep(0.5)
            addresses = _listening_addresses(server.pid)
        assert addresses, "JupyterLab did not start listening within 60 s"
        assert addresses <= {"127.0.0.1", "::1"}, f"JupyterLab listens on {addresses}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.ray
def test_local_ray_from_init_ray_keeps_token_auth_on_and_the_token_private():
    probe = (
        "import os, stat, ray\n"
        "from rlkit.distributed.runtime.cluster import init_ray, protect_token_file\n"
        "init_ray(num_cpus=1)\n"
        "token = protect_token_file()\n"
        "print(os.environ.get('RAY_AUTH_MODE'), token is not None and "
        "oct(stat.S_IMODE(token.stat().st_mode)))\n"
        "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout.split()
    assert out[-2] == "token"  # ray.init turned token authentication on
    assert out[-1] == oct(0o600)  # and the token file is the owner's alone


@pytest.mark.ray
def test_init_ray_lets_a_256x256_networks_weights_travel_inside_the_messages():
    """A local cluster from init_ray raises Ray's inline limit to 1 MiB in every Ray process
    (so 270 KB weights go by value), unless the user set the limit: then theirs holds."""
    probe = (
        "import os, numpy as np, ray\n"
        "from rlkit.distributed.runtime.cluster import INLINE_LIMIT_ENV, init_ray\n"
        "from rlkit.distributed.runtime.parameter_server import pack_weights\n"
        "@ray.remote(num_cpus=0)\n"
        "def seen():\n"
        "    w = {'w': np.zeros(270_000 // 4, np.float32)}\n"
        "    return os.environ.get(INLINE_LIMIT_ENV), isinstance(pack_weights(w), dict)\n"
        "for preset in (None, '200000'):\n"
        "    os.environ.pop(INLINE_LIMIT_ENV, None)\n"
        "    if preset: os.environ[INLINE_LIMIT_ENV] = preset\n"
        "    init_ray(num_cpus=1)\n"
        "    print(*ray.get(seen.remote(), timeout=60))\n"
        "    ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_max_direct_call_object_size")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, check=True,
                         capture_output=True, text=True, timeout=180).stdout.split()
    assert out[-4:] == ["1048576", "True", "200000", "False"]
