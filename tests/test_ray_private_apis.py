"""Canaries for the five private Ray APIs rlkit reaches into (issue 41's audit; the list and
why each is needed are in docs/architecture.md, "Ray's private APIs"). Ray may change them in any
release without warning: these tests turn a silent loss (a role's node no longer named, an
attach that waits 20 s to fail) into a named failure on the upgrade."""

import time

import pytest

from rlkit.distributed.runtime.ray_private import gcs_probe_tools

ray = pytest.importorskip("ray")


def test_the_private_symbols_we_import_still_exist():
    from ray._private import services, state
    from ray._private.authentication import authentication_token_setup
    from ray._raylet import AuthenticationTokenLoader, Config, InnerGcsClient

    assert callable(state.actors)  # actor_state: the GCS actor table, without the dashboard
    assert callable(services.canonicalize_bootstrap_address)  # attach to address="auto"
    assert callable(authentication_token_setup.maybe_enable_token_auth_if_token_available)
    assert callable(InnerGcsClient.standalone)  # the attach probe with a deadline
    assert callable(AuthenticationTokenLoader.instance) and callable(Config.initialize)
    assert gcs_probe_tools() is not None  # else attach's probe is skipped, silently slower


def test_actor_state_reads_ray_s_record_of_a_live_and_a_killed_actor(ray_cluster):
    """What the supervisor reads to name a role's node and to tell a dead actor from a slow
    one: the actor's state and its node, from the GCS table."""
    from rlkit.distributed.runtime.actor_state import actor_state

    @ray.remote(num_cpus=0)
    class Probe:
        def node(self):
            return ray.get_runtime_context().get_node_id()

        def actor_id(self):
            return ray.get_runtime_context().get_actor_id()

    probe = Probe.remote()
    node = ray.get(probe.node.remote(), timeout=60)
    assert probe._actor_id.hex() == ray.get(probe.actor_id.remote())  # the handle's private id
    alive = actor_state(probe)
    assert alive["State"] == "ALIVE" and alive["Address"]["NodeID"] == node
    ray.kill(probe)
    deadline = time.monotonic() + 30
    while actor_state(probe).get("State") != "DEAD" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert actor_state(probe)["State"] == "DEAD"
