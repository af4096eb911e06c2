"""Every private Ray API rlkit uses, in one place (docs/architecture.md, "Ray's private APIs",
says why each is needed; ``tests/test_ray_private_apis.py`` fails by name when an upgrade moves
one). Each wrapper degrades to a plainer behaviour instead of failing a run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.actor import ActorHandle


def actor_record(handle: ActorHandle) -> dict[str, Any]:
    """Ray's record of ``handle``'s actor in the GCS table (``State``, ``Address``, ...),
    without the dashboard the public ``ray.util.state`` needs; ``{}`` if Ray cannot say."""
    try:
        from ray._private import state

        return dict(state.actors(handle._actor_id.hex()))
    except Exception:  # noqa: BLE001  (a private table: what it says is a courtesy)
        return {}


def resolve_auto_address() -> str:
    """The ``host:port`` that ``ray.init(address="auto")`` would join; ``ConnectionError`` if
    no cluster runs on this machine."""
    from ray._private.services import canonicalize_bootstrap_address

    return canonicalize_bootstrap_address("auto")


def gcs_probe_tools() -> SimpleNamespace | None:
    """Ray's GCS client and token machinery, for a probe with a deadline (``None`` on a Ray
    without them: the caller then lets ``ray.init`` find out)."""
    try:
        from ray._private.authentication import authentication_token_setup as auth
        from ray._raylet import AuthenticationTokenLoader, Config, InnerGcsClient
    except ImportError:
        return None
    return SimpleNamespace(auth=auth, AuthenticationTokenLoader=AuthenticationTokenLoader,
                           Config=Config, InnerGcsClient=InnerGcsClient)
