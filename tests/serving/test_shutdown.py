"""SIGINT and SIGTERM: the requests in flight are answered, then the server
returns normally. Run in this process's main thread (only it handles
signals), with a stand-in model that holds its request until the signal has
reached the server, so the request is in flight whatever the timing."""

import os
import signal
import threading

import httpx
import pytest
import uvicorn

from keras_transformer.serving import bind_socket, create_app, run_until_signalled

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread only"
)


class Server(uvicorn.Server):
    """A uvicorn server whose `should_exit`, once set (by a signal handler
    or by the test), sets the event `exiting`."""

    def __init__(self, config):
        self.exiting = threading.Event()
        super().__init__(config)

    @property
    def should_exit(self):
        return self.exiting.is_set()

    @should_exit.setter
    def should_exit(self, value):
        if value:
            self.exiting.set()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_drains_the_request_in_flight_then_serving_returns(signum):
    in_predict, signalled = threading.Event(), threading.Event()

    def predict(texts):
        in_predict.set()
        signalled.wait(10)
        return [{"translations": t[::-1]} for t in texts]

    sock = bind_socket("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1/models/echo:predict"
    server = Server(uvicorn.Config(create_app(predict, "echo"), log_level="warning"))
    answers = []

    def client():  # connects at once: the socket already listens
        try:
            answers.append(httpx.post(url, json={"instances": ["abc"]}, timeout=20))
        except httpx.HTTPError as error:
            answers.append(error)

    def send_signal():
        if in_predict.wait(20):
            os.kill(os.getpid(), signum)
            server.exiting.wait(10)  # the handler ran: now let the model answer
        signalled.set()
        server.should_exit = True  # in case the signal never arrived: the test fails, not hangs

    received = []  # what the handlers from before the server get: nothing

    def record(s, frame):
        received.append(s)

    previous = {s: signal.signal(s, record) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = [threading.Thread(target=client, daemon=True), threading.Thread(target=send_signal, daemon=True)]
    try:
        for thread in threads:
            thread.start()
        run_until_signalled(server, sock)  # returns: no exception, no KeyboardInterrupt
        for thread in threads:
            thread.join(timeout=20)
        assert received == []  # the signal was not raised again for the earlier handler
        assert signal.getsignal(signal.SIGINT) is record and signal.getsignal(signal.SIGTERM) is record  # restored
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    assert [a.status_code for a in answers] == [200], answers
    assert answers[0].json() == {"predictions": [{"translations": "cba"}]}
    assert sock.fileno() == -1  # closed
