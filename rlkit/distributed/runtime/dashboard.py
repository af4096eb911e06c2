"""Ray's dashboard, asked over HTTP. It listens on the head's localhost only (port 8265 unless
``dashboard_port`` says otherwise) and, with Ray 2.60's token authentication on, answers only its
health checks without the cluster's token: every other request without it gets 401. The
dashboard needs ``ray[default]`` (pinned in ``requirements.txt``) and a head started with it
(``include_dashboard=True``, or ``ray start --head --include-dashboard=true``); rlkit's own
``init_ray`` starts none, to keep its processes off a small machine's cores."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from rlkit.distributed.runtime.cluster import token_path

#: What to do when nothing answers where a dashboard should be.
NO_DASHBOARD_FIX = ("Fix: install ray[default]==2.60.0 (requirements.txt pins it) and start the "
                    "head with include_dashboard=True (ray.init, or a Cluster's head_node_args), "
                    "or `ray start --head --include-dashboard=true`; check the port.")


@dataclass(frozen=True)
class DashboardAnswer:
    """One HTTP answer: its status (200, or 401 without the token) and its body."""

    status: int
    body: str

    def json(self) -> Any:
        return json.loads(self.body)


def auth_token() -> str | None:
    """The cluster's token as Ray reads it: ``RAY_AUTH_TOKEN``, else the token file; ``None``
    if there is neither."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    path = token_path()
    return path.read_text().strip() if path.is_file() else None


def ask_dashboard(url: str, path: str, *, with_token: bool = True,
                  timeout_s: float = 10.0) -> DashboardAnswer:
    """``GET path`` from the dashboard at ``url`` (``host:port`` or ``http://host:port``), with
    the cluster's token unless ``with_token`` is false. An HTTP error comes back as an answer
    (its status and text); nothing listening at ``url`` raises ``ConnectionError`` naming the
    address and the fix."""
    base = url if url.startswith(("http://", "https://")) else f"http://{url}"
    headers = {}
    token = auth_token() if with_token else None
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base.rstrip("/") + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            return DashboardAnswer(answer.status, answer.read().decode())
    except urllib.error.HTTPError as err:
        return DashboardAnswer(err.code, err.read().decode(errors="replace"))
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ConnectionError(f"No Ray dashboard answers at {base} ({reason}; waited at most "
                              f"{timeout_s:g} s). {NO_DASHBOARD_FIX}") from None
