"""A real uvicorn server on a free localhost port, in a background thread."""

import threading

import pytest
import uvicorn

from keras_transformer.serving import bind_socket, run_until_signalled


class RunningServer:
    """Serves `app` on a socket bound to port 0 here: the port is the
    socket's own, with no window for another process to take it. The
    socket listens before the server starts, so a client may connect at
    once: its request waits in the socket's backlog until the server reads
    it, with nothing to poll."""

    def __init__(self, app):
        sock = bind_socket("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=run_until_signalled, args=(self.server, sock), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def run_server():
    servers = []

    def start(app):
        servers.append(RunningServer(app))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def call_app(app, requests):
    """`app`'s answers to `requests`, `[(method, url, httpx keyword
    arguments)]`, in this process: httpx's ASGI transport, inside the app's
    lifespan (its batcher running). No socket, no thread: cheaper than
    `run_server` where the HTTP connection itself is not under test."""
    import asyncio

    import httpx

    async def run():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=300) as client:
                return [await client.request(method, url, **kwargs) for method, url, kwargs in requests]

    return asyncio.run(run())
