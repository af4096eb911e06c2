"""Starting Ray or attaching to a cluster, and keeping its token private. (Where each actor
goes is :mod:`rlkit.distributed.runtime.placement`.)"""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
import warnings
from pathlib import Path
from typing import Any

from rlkit.distributed.runtime.ray_private import gcs_probe_tools, resolve_auto_address


#: The environment variable holding Ray's ``max_direct_call_object_size``: an argument or a
#: reply smaller than this travels inside the call message itself instead of through the
#: shared-memory object store. Every Ray process reads it at start, so workers inherit it from
#: the process that started the cluster.
INLINE_LIMIT_ENV = "RAY_max_direct_call_object_size"
#: Ray's own default limit.
RAY_DEFAULT_INLINE_LIMIT = 100 * 1024
#: The limit for the clusters :func:`init_ray` starts: a 256x256 network's weights (270 KB)
#: then skip the object store; measured here, a weights version costs training 1.3 ms instead
#: of 2.1 ms (``benchmarks/weight_sync.py``). Bigger objects still go through the store.
LOCAL_INLINE_LIMIT = 1024 * 1024
#: Seconds each step of attaching to ``RAY_ADDRESS`` (the TCP connect, the GCS's first answer)
#: may wait before :func:`init_ray` gives up; Ray alone retries for 20 s to over 10 minutes.
ATTACH_TIMEOUT_S = 5.0
#: The Ray Client's port, for a ``ray://`` address that names none.
RAY_CLIENT_PORT = 10001


def inline_limit() -> int:
    """The inline limit in bytes that Ray uses in this process (see :data:`INLINE_LIMIT_ENV`)."""
    value = os.environ.get(INLINE_LIMIT_ENV, "")
    return int(value) if value.isdigit() else RAY_DEFAULT_INLINE_LIMIT


def init_ray(num_cpus: int | None = None,
             runtime_env: dict[str, Any] | None = None) -> dict[str, float]:
    """Attach to the cluster at ``RAY_ADDRESS`` if set, else start a local one; no dashboard.

    ``RAY_ADDRESS`` may be ``host:port`` (the head's GCS port, 6379 by default), ``auto`` (the
    cluster ``ray start`` left on this machine) or ``ray://host:port`` (the Ray Client, which
    needs ``ray[client]``). Attaching checks the address first, each step waiting at most
    :data:`ATTACH_TIMEOUT_S`, and fails with the fix where Ray alone retries for 20 s or more.

    Without ``RAY_ADDRESS`` (or with ``local``) it starts a new local instance, never joining a
    cluster that ``ray start`` left running on this machine. That instance keeps Ray 2.60's
    token authentication on (``ray.init`` turns it on unless ``RAY_AUTH_MODE`` says otherwise):
    its ports listen on the machine's network address, not only on localhost, so the token is
    what keeps other machines out. The token file (``~/.ray/auth_token``) is made readable by
    its owner only. Setting ``RAY_AUTH_MODE=disabled`` gets a warning.

    A local instance also sends objects up to :data:`LOCAL_INLINE_LIMIT` (1 MiB) inside call
    messages, unless ``RAY_max_direct_call_object_size`` is already set: it sets that variable
    in this process before starting Ray, so every Ray process of the instance inherits it.

    Args:
        num_cpus: CPUs a *local* instance offers (default: all logical cores).
        runtime_env: Ray's runtime environment for every process this driver starts, on any
            node: e.g. ``{"working_dir": ".", "env_vars": {"GLOO_SOCKET_IFNAME": "eth0"}}``
            ships the project's files to each node and sets the variables in every actor.
            Only at the first call: a process already attached cannot change it.

    Returns:
        The cluster's resources, e.g. ``{"CPU": 2.0, ...}``.

    Raises:
        ConnectionError: ``RAY_ADDRESS`` is set but nothing answers there, no Ray GCS answers
            there, ``auto`` finds no cluster, or the cluster refuses this process's token (none
            or a wrong one). The message names ``RAY_ADDRESS`` and the fix.
        ImportError: ``RAY_ADDRESS`` is a ``ray://`` address and ``ray[client]`` is missing.
        ValueError: ``RAY_ADDRESS`` is not one of the forms above; ``runtime_env`` is not a
            dict (with ``env_vars`` a dict of strings), or Ray is already initialized here.
    """
    import ray

    _check_runtime_env(runtime_env)
    if runtime_env is not None and ray.is_initialized():
        raise ValueError("runtime_env was given, but Ray is already initialized in this process, "
                         "so it cannot apply. Fix: call ray.shutdown() first, or pass runtime_env "
                         "to the first init_ray().")
    if not ray.is_initialized():
        address = os.environ.get("RAY_ADDRESS", "")
        if address and address != "local":
            _attach(ray, address, runtime_env)
        else:
            mode = os.environ.get("RAY_AUTH_MODE", "")
            if mode and mode.lower() != "token":
                warnings.warn(f"RAY_AUTH_MODE={mode!r} turns Ray's token authentication off: "
                              "anyone who can reach this machine's Ray ports can run code "
                              "here. Fix: unset RAY_AUTH_MODE.", stacklevel=2)
            os.environ.setdefault(INLINE_LIMIT_ENV, str(LOCAL_INLINE_LIMIT))
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                     log_to_driver=True, runtime_env=runtime_env)
            protect_token_file()
    return ray.cluster_resources()


def _check_runtime_env(runtime_env: Any) -> None:
    """``runtime_env`` is ``None`` or a dict whose ``env_vars``, if any, map strings to
    strings (what Ray requires; it would otherwise fail inside the first actor's start)."""
    if runtime_env is None:
        return
    if not isinstance(runtime_env, dict):
        raise ValueError(f"runtime_env={runtime_env!r} must be a dict, e.g. {{'working_dir': '.', "
                         f"'env_vars': {{'GLOO_SOCKET_IFNAME': 'eth0'}}}}. Fix: pass a dict.")
    env_vars = runtime_env.get("env_vars", {})
    if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise ValueError(f"runtime_env['env_vars']={env_vars!r} must map names to strings. "
                         f"Fix: quote the values, e.g. {{'OMP_NUM_THREADS': '1'}}.")


def _attach(ray, address: str, runtime_env: dict[str, Any] | None = None) -> None:
    """Check that the cluster at ``address`` (``RAY_ADDRESS``) answers, then attach to it."""
    where = f"RAY_ADDRESS={address!r}"
    host, port = _host_port(address, where)
    try:
        socket.create_connection((host, port), timeout=ATTACH_TIMEOUT_S).close()
    except OSError as err:
        flag = "ray-client-server-port" if address.startswith("ray://") else "port"
        raise ConnectionError(
            f"Nothing answers at {where} ({host}:{port}: {err or type(err).__name__}; waited "
            f"at most {ATTACH_TIMEOUT_S:g} s). Fix: start the head on that machine with `ray "
            f"start --head --{flag}={port}`, check the host, the port and any firewall between, "
            f"or unset RAY_ADDRESS to start Ray on this machine.") from None
    if address.startswith("ray://"):
        if importlib.util.find_spec("grpc") is None:
            raise ImportError(
                f"{where} is a Ray Client address, which needs ray[client] (not installed). "
                f"Fix: pip install \"ray[client]==2.60.0\", or attach through the head's GCS "
                f"port instead: RAY_ADDRESS={host}:6379.")
    else:
        _probe_gcs(f"[{host}]:{port}" if ":" in host else f"{host}:{port}", where,
                   auto=address == "auto")
    try:
        ray.init(address=address, runtime_env=runtime_env)
    except Exception as err:
        if _refused_token(err):
            raise ConnectionError(token_error_message(where)) from err
        raise


def _host_port(address: str, where: str) -> tuple[str, int]:
    """The host and port that ``address`` names; ``auto``: the cluster found on this machine."""
    if address == "auto":
        try:
            address = resolve_auto_address()
        except ConnectionError:
            raise ConnectionError(
                f"{where}, but no Ray cluster runs on this machine. Fix: start one with `ray "
                f"start --head`, name a head with RAY_ADDRESS=host:6379, or unset RAY_ADDRESS "
                f"to start Ray on this machine.") from None
    rest = address.split("://", 1)[-1]
    if address.startswith("ray://") and not rest.rpartition(":")[2].isdigit():
        rest += f":{RAY_CLIENT_PORT}"
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{where} names no host:port. Fix: use host:port (e.g. head:6379), "
                         f"ray://host:port, auto, or unset RAY_ADDRESS.")
    return host.strip("[]"), int(port)


def _probe_gcs(address: str, where: str, auto: bool) -> None:
    """Ask the Ray GCS at ``address`` for its cluster id, waiting at most
    :data:`ATTACH_TIMEOUT_S`; raise if it does not answer, or refuses this process's token,
    where ``ray.init`` would retry for 20 s or more and then not say why."""
    tools = gcs_probe_tools()
    if tools is None:  # another Ray version: let ray.init find out
        return
    auth, Config, InnerGcsClient = tools.auth, tools.Config, tools.InnerGcsClient
    AuthenticationTokenLoader = tools.AuthenticationTokenLoader
    # Ray caches RAY_AUTH_MODE and the token at first use: read them again, so that a fix made
    # in os.environ after a refused attach counts without restarting Python
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
    if auto:  # what ray.init(address="auto") does: a token on this machine turns the mode on
        auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    outcome: list[BaseException | None] = []

    def probe() -> None:
        try:
            InnerGcsClient.standalone(address, None, int(ATTACH_TIMEOUT_S * 1000))
            outcome.append(None)
        except Exception as err:  # noqa: BLE001 - judged below
            outcome.append(err)

    thread = threading.Thread(target=probe, name="rlkit-gcs-probe", daemon=True)
    thread.start()
    thread.join(ATTACH_TIMEOUT_S)  # the C++ call releases the GIL; it ends on its own later
    if outcome == [None]:
        return
    error = outcome[0] if outcome else None
    if _refused_token(error):
        raise ConnectionError(token_error_message(where)) from error
    why = f"it said: {str(error)[:200]}" if outcome else f"no answer in {ATTACH_TIMEOUT_S:g} s"
    raise ConnectionError(
        f"{where} accepts connections, but no Ray GCS answers there ({why}). Fix: check the "
        f"host, and name the head's GCS port (`ray start --head --port=...`, 6379 by "
        f"default); the Ray Client port (10001) needs ray://.") from error


def _refused_token(err: BaseException | None) -> bool:
    """Whether ``err`` or an exception it came from is a cluster refusing this process's token
    (``ray.init`` keeps only the text of the ``AuthenticationError``, so the text is read)."""
    for _ in range(10):  # a bounded walk down the chain
        if err is not None and ("InvalidAuthToken" in str(err)
                                or "token is invalid or incorrect" in str(err)):
            return True
        err = err and (err.__cause__ or err.__context__)
    return False


def token_error_message(where: str) -> str:
    """The error for a cluster that refused this process's token.

    Args:
        where: The address it was attaching to, e.g. ``"RAY_ADDRESS='head:6379'"``.

    Returns:
        A message naming the address, this process's ``RAY_AUTH_MODE`` and the fix.
    """
    mode = os.environ.get("RAY_AUTH_MODE")
    sent = "" if (mode or "").lower() == "token" else ", so it sent no token"
    return (f"The Ray cluster at {where} requires token authentication and refused this "
            f"process (RAY_AUTH_MODE={mode!r} here{sent}; a wrong token is refused the same "
            f"way). Fix: set RAY_AUTH_MODE=token and give the cluster's token (`ray "
            f"get-auth-token` on the head prints it) in RAY_AUTH_TOKEN, in a file named by "
            f"RAY_AUTH_TOKEN_PATH, or in ~/.ray/auth_token; then call init_ray() again.")


def require_ray() -> dict[str, float]:
    """The running cluster's resources; a clear error if Ray was not started."""
    import ray

    if not ray.is_initialized():
        raise RuntimeError("Ray is not initialised. Fix: call "
                           "rlkit.distributed.runtime.cluster.init_ray() first.")
    return ray.cluster_resources()


def free_local_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (as the kernel hands one out)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def token_path() -> Path:
    """Where Ray keeps this machine's token: ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH", Path.home() / ".ray" / "auth_token"))


def protect_token_file() -> Path | None:
    """Make Ray's token file readable by its owner only (Ray 2.60 writes it world-readable);
    returns its path, or ``None`` if there is none or it is not ours."""
    token = token_path()
    try:
        if token.is_file() and token.stat().st_uid == os.getuid():
            token.chmod(0o600)
            return token
    except OSError:
        pass
    return None

