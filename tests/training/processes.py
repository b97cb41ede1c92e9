"""Runs `run_training.py` in fresh processes (devices are fixed at start-up).

Every wait has a timeout, and a process that outlives it is killed: a hung
training process (a worker waiting for a peer that died) must fail its
test, not hang the suite. Tests call `stop` in a `finally`, so that a
failed assertion leaves no process running.
"""

import contextlib
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


@contextlib.contextmanager
def held_ports(count):
    """`count` ports that the OS picks, held here until the block ends, for
    TF_CONFIG workers (started with `worker_env`) that bind them meanwhile.

    Each is a socket bound with SO_REUSEPORT that never listens: while it is
    open, the kernel gives its port to no other `bind(0)` or outgoing
    connection, and another process can bind it only with SO_REUSEPORT as
    well, as TensorFlow's gRPC server does under TF_GRPC_REUSE_PORT=1. So
    the port passes from this process to its worker without a moment in
    which it is free. Connections reach the worker's listening socket only.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("0.0.0.0", 0))  # the address TensorFlow's worker binds
        yield [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def worker_env(ports, index):
    """The environment of TF_CONFIG worker `index` of the cluster on `ports` (`held_ports`)."""
    return {"TF_CONFIG": tf_config(ports, index), "TF_GRPC_REUSE_PORT": "1"}


def tf_config(ports, index):
    return json.dumps({
        "cluster": {"worker": [f"localhost:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    })
