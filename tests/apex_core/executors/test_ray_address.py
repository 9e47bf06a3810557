"""A Ray address where nothing listens is one line within seconds, not minutes of Ray's own retries."""

from __future__ import annotations

import socket
import time

import pytest

from apex_core.errors import ApexUserError
from apex_core.executors.ray_executor import check_reachable
from tests.conftest import free_port


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_nothing_listens_is_refused_at_once_in_one_line(scheme):
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ApexUserError) as refused:
        check_reachable(f"{scheme}127.0.0.1:{port}", timeout_s=5)
    assert time.monotonic() - started < 5
    message = str(refused.value)
    assert "\n" not in message and f"port {port}" in message and "ray start --head" in message


def test_a_listening_address_and_the_ones_ray_resolves_itself_pass():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_reachable(f"127.0.0.1:{server.getsockname()[1]}")
    for address in (None, "", "auto", "local"):
        check_reachable(address)


def test_apex_run_with_an_unreachable_cluster_stops_before_a_run_folder_exists(apex_cli, tmp_path):
    results = tmp_path / "results"
    done = apex_cli("run", "--workload", "cpu-mini", "--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}",
                    "--results-dir", str(results))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "cannot reach the Ray cluster" in lines[0], done.stderr[-2000:]
    assert not results.exists()
