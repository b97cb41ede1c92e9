"""The Batcher alone: batching, failures, argument checks."""

import asyncio
import threading

import pytest

from keras_transformer.serving import Batcher


async def submit_together(batcher, requests):
    await batcher.start()
    try:
        return await asyncio.gather(*(batcher.submit(r) for r in requests), return_exceptions=True)
    finally:
        await batcher.stop()


def test_a_failing_request_does_not_fail_the_others_in_its_batch():
    def predict(texts):
        if "bad" in texts:
            raise RuntimeError("cannot translate 'bad'")
        return [t.upper() for t in texts]

    batcher = Batcher(predict, max_batch_size=8, batch_timeout_s=0.5)
    good, bad, other = asyncio.run(submit_together(batcher, [["a", "b"], ["bad"], ["c"]]))
    assert good == ["A", "B"] and other == ["C"]
    assert isinstance(bad, RuntimeError) and "bad" in str(bad)
    assert batcher.batch_sizes == [4, 2, 1, 1]  # together first, then each alone


def test_requests_already_waiting_join_the_batch_whatever_its_timeout():
    # With no timeout, the requests queued while the model was busy still go
    # in one batch: the timeout applies to requests yet to come, so a slow
    # event loop (a busy CPU) never splits what is already waiting.
    in_predict, release = threading.Event(), threading.Event()

    def predict(texts):
        if texts == ["first"]:
            in_predict.set()
            release.wait(30)
        return [t.upper() for t in texts]

    async def run(batcher):
        await batcher.start()
        try:
            first = asyncio.ensure_future(batcher.submit(["first"]))
            assert await asyncio.to_thread(in_predict.wait, 30)  # the first batch is in `predict`
            others = [asyncio.ensure_future(batcher.submit([f"r{i}"])) for i in range(5)]
            # One turn of the event loop: each submit runs until it awaits its
            # answer, its request queued (the queue has no bound: no wait).
            await asyncio.sleep(0)
            release.set()
            return await asyncio.gather(first, *others)
        finally:
            await batcher.stop()

    batcher = Batcher(predict, max_batch_size=8, batch_timeout_s=0)
    assert asyncio.run(run(batcher)) == [["FIRST"]] + [[f"R{i}"] for i in range(5)]
    assert batcher.batch_sizes == [1, 5]


def test_no_inputs_no_call():
    calls = []
    batcher = Batcher(lambda texts: calls.append(texts) or texts, max_batch_size=4)
    assert asyncio.run(submit_together(batcher, [[], ["a"]])) == [[], ["a"]]
    assert calls == [["a"]]


def test_predict_returning_too_few_outputs_is_an_error():
    batcher = Batcher(lambda texts: texts[:-1], max_batch_size=4)
    (result,) = asyncio.run(submit_together(batcher, [["a", "b"]]))
    assert isinstance(result, ValueError) and "returned 1 outputs for 2 inputs" in str(result)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"max_batch_size": 0}, "`max_batch_size` must be a positive integer. Received: max_batch_size=0"),
        ({"max_batch_size": 1.5}, "Received: max_batch_size=1.5"),
        ({"batch_timeout_s": -1}, "`batch_timeout_s` must be a finite number >= 0. Received: batch_timeout_s=-1"),
        ({"batch_timeout_s": "x"}, "Received: batch_timeout_s='x'"),
    ],
)
def test_bad_arguments(kwargs, words):
    with pytest.raises(ValueError) as error:
        Batcher(lambda texts: texts, **kwargs)
    assert words in str(error.value)
