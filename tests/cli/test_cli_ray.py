"""The Ray executor, against a local Ray instance: the same stored results as the local executor."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray  # noqa: E402  (the ray extra is part of the test install)
from symkit_cli_helpers import HERE

from symkit.lab.runner.sweep import plan, run_sweep
from symkit.lab.store import Store


@pytest.fixture
def local_ray(monkeypatch):
    """One small local Ray instance whose workers can import the toy experiment."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("SYMKIT_EXPERIMENT_MODULES", "symkit_cli_toy")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_stores_the_same_results_as_local(toy, tmp_path, local_ray):
    specs = plan(toy, quick=True, seeds=[0, 1, 2], settings={"fail_seed": [2]})  # failures travel back too
    local, remote = Store(tmp_path / "local.db"), Store(tmp_path / "ray.db")
    run_sweep(toy, specs, local)
    result = run_sweep(toy, specs, remote, executor="ray", jobs=2)
    assert (result.ran, result.failed) == (6, 2)

    def table(store):
        return {(r.config_hash, r.seed): (r.config, r.metrics, r.status) for r in store.runs(toy.name)}

    assert table(remote) == table(local)
    assert len(table(remote)) == 6
    failed = remote.runs(toy.name, status="failed")
    assert all("toy failure on purpose (seed 2)" in r.error for r in failed)
    assert ray.is_initialized()  # an instance the caller started is left running


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_cluster():
    """A Ray cluster started the way a user starts one (``ray start --head``) with two worker slots; its workers
    can import the toy experiment. Only this cluster is stopped afterwards: its head runs with ``--block`` in a
    process group of its own, with a private temporary directory, and that group is ended (``ray stop`` would end
    every Ray instance of the machine, a user's own included)."""
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile

    from symkit_cli_helpers import cli_env

    ray_cmd = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray_cmd is not None, "the ray extra installs the ray command beside python"
    env = cli_env(RAY_USAGE_STATS_ENABLED="0")
    address = f"127.0.0.1:{_free_port()}"
    temp_dir = tempfile.mkdtemp(prefix="symkit-ray-")  # short: Ray's socket paths must stay under 108 bytes
    head = subprocess.Popen([ray_cmd, "start", "--head", f"--port={address.split(':')[1]}", "--num-cpus=2",
                             "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}",
                             "--block"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output = []
        for line in head.stdout:  # the head prints this line once its processes run, then blocks
            output.append(line)
            if "Ray runtime started" in line:
                break
        assert head.poll() is None, "".join(output)
        yield address, env
    finally:
        head.terminate()  # the blocking head ends the processes it started, then itself
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # whatever is left in its group
        except ProcessLookupError:
            pass
        head.stdout.close()
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_a_sweep_on_a_ray_cluster_started_with_ray_start_stores_what_the_local_executor_stores(tmp_path, ray_cluster):
    from symkit_cli_helpers import run_symkit

    address, env = ray_cluster
    local, remote = tmp_path / "local.db", tmp_path / "cluster.db"
    common = ["--quick", "--seeds", "0-2", "--set", "fail_seed=2"]
    assert run_symkit("reproduce", "cli-toy", *common, "--store", str(local)).returncode == 1  # a failed run: exit 1
    done = run_symkit("reproduce", "cli-toy", *common, "--executor", "ray", "--ray-address", address,
                      "--store", str(remote), timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "6 runs in the sweep; 0 already stored, ran 6 (2 failed)" in output

    def table(path):
        return {(r.config_hash, r.seed): (r.config, r.metrics, r.status) for r in Store(path).runs("cli-toy")}

    assert table(remote) == table(local) and len(table(local)) == 6
    hosts = {r.host for r in Store(remote).runs("cli-toy")}
    assert hosts and all(hosts)  # every run names the node that ran it


def test_the_ray_executor_without_an_address_starts_its_own_instance_beside_a_running_cluster(tmp_path, ray_cluster):
    """Without ``--ray-address`` the sweep runs on a private local instance, even when a cluster is already running
    on this machine (``ray.init()`` alone would join that cluster and refuse ``num_cpus``), and leaves the cluster
    running."""
    from symkit_cli_helpers import run_symkit

    address, env = ray_cluster
    common = ["--quick", "--seeds", "0-1", "--executor", "ray", "--jobs", "2"]
    own = run_symkit("reproduce", "cli-toy", *common, "--store", str(tmp_path / "own.db"), timeout=300)
    assert own.returncode == 0, own.stdout + own.stderr
    assert len(Store(tmp_path / "own.db").runs("cli-toy", status="ok")) == 4
    on_cluster = run_symkit("reproduce", "cli-toy", *common, "--ray-address", address,
                            "--store", str(tmp_path / "cluster.db"), timeout=300)
    assert on_cluster.returncode == 0, on_cluster.stdout + on_cluster.stderr  # the cluster still serves
