"""Runs `run_training.py` in fresh processes (devices are fixed at start-up).

Every wait has a timeout, and a process that outlives it is killed: a hung
training process (a worker waiting for a peer that died) must fail its
test, not hang the suite. Tests call `stop` in a `finally`, so that a
failed assertion leaves no process running.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT = 180  # seconds: a tiny model's few steps take well under a minute


def start(output_dir, *args, backend="tensorflow", env=None):
    """`run_training.py OUTPUT_DIR ARGS...` in a new process."""
    return start_script("run_training.py", output_dir, *args, backend=backend, env=env)


def start_script(script, *args, backend="tensorflow", env=None):
    """`script` (a file beside this one) with `args`, in a new process."""
    environment = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "XLA_FLAGS")}
    environment.update(KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, **(env or {}))
    return subprocess.Popen(
        [sys.executable, os.path.join(HERE, script), *map(str, args)],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(process, timeout=TIMEOUT, expect=0):
    """The output of `process`, once it exits with `expect`; killed if it runs past `timeout`."""
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate(timeout=30)
        raise AssertionError(f"still running after {timeout} s, killed:\n{(output or '')[-4000:]}") from None
    assert process.returncode == expect, f"exit {process.returncode}:\n{output[-4000:]}"
    return output


def run_all(*processes, timeout=TIMEOUT):
    """The outputs of `processes`, run to the end; on a failure the others are killed too."""
    try:
        return [finish(p, timeout) for p in processes]
    finally:
        stop(*processes)


def stop(*processes, timeout=30):
    """Kills those of `processes` still running and reaps them (for a `finally`)."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=timeout)
        if process.stdout is not None:
            process.stdout.close()


def results(output_dir, tag="worker0"):
    weights = np.load(os.path.join(output_dir, f"{tag}-weights.npz"))
    losses = np.load(os.path.join(output_dir, f"{tag}-losses.npy"))
    return [weights[k] for k in weights.files], losses


def free_ports(count):
    """`count` distinct ports free now, for TF_CONFIG workers that bind them later.

    A worker binds its port itself, after this returns, so the port cannot
    stay held here. Ports the kernel hands out on its own (`bind(0)`,
    outgoing connections) come from `ip_local_port_range`; these are picked
    below that range, where nothing else is given them in the meantime, and
    each is claimed with a file that only one test process of the run can
    create (in tests/run.sh's folder for all passes, or pytest-xdist's for
    its workers), so that tests running side by side never pick the same one.
    """
    import random
    import tempfile

    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_start = int(f.read().split()[0])
    except OSError:
        ephemeral_start = 32768
    claims = os.environ.get("KERAS_TRANSFORMER_TEST_SHARED") or os.path.join(
        tempfile.gettempdir(), "keras-transformer-ports-" + os.environ.get("PYTEST_XDIST_TESTRUNUID", str(os.getpid())))
    claims = os.path.join(claims, "ports")
    os.makedirs(claims, exist_ok=True)
    ports, rng = [], random.Random()
    while len(ports) < count:
        port = rng.randrange(max(1024, ephemeral_start - 12000), ephemeral_start)
        try:
            os.close(os.open(os.path.join(claims, str(port)), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue  # another test's
        with socket.socket() as s:
            try:
                s.bind(("localhost", port))
            except OSError:
                continue
        ports.append(port)
    return ports


def tf_config(ports, index):
    return json.dumps({
        "cluster": {"worker": [f"localhost:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    })
