from tests.serving.conftest import run_server  # noqa: F401 - a real server fixture
