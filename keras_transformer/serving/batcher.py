"""Groups concurrent requests into batches for one predict function."""

import asyncio

from keras_transformer.validation import check_non_negative_number, check_positive


class Batcher:
    """Runs `predict` on batches built from concurrent requests.

    Each request brings a list of inputs. The first waiting request opens a
    batch; requests already waiting, and those that arrive within
    `batch_timeout_s`, join it while the batch holds at most
    `max_batch_size` inputs (a request is never split).
    `predict(list_of_inputs) -> list_of_outputs` runs in a worker thread, so
    the event loop keeps accepting requests meanwhile; throughput then grows
    with load, since a batch costs little more than a single input. If it
    fails on a batch of several requests, each request is run alone, so only
    the requests that fail by themselves get the error.

    Example:

        batcher = Batcher(lambda texts: [t.upper() for t in texts])
        await batcher.start()
        await batcher.submit(["hello"])  # ["HELLO"]
    """

    def __init__(self, predict, max_batch_size=32, batch_timeout_s=0.005):
        check_positive("max_batch_size", max_batch_size)
        check_non_negative_number("batch_timeout_s", batch_timeout_s)
        self.predict = predict
        self.max_batch_size = max_batch_size
        self.batch_timeout_s = batch_timeout_s
        self.batch_sizes = []  # sizes of the batches run, for tests and stats
        self._queue = None
        self._carry = None
        self._task = None

    async def start(self):
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run())

    async def stop(self):
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def submit(self, inputs):
        """The outputs of `predict` for `inputs`, computed in some batch.

        An empty `inputs` gets `[]` at once, without a call to `predict`.
        """
        inputs = list(inputs)
        if not inputs:
            return []
        future = asyncio.get_running_loop().create_future()
        await self._queue.put((inputs, future))
        return await future

    async def _next_batch(self):
        loop = asyncio.get_running_loop()
        first = self._carry or await self._queue.get()
        self._carry = None
        batch, size = [first], len(first[0])
        deadline = loop.time() + self.batch_timeout_s
        while size < self.max_batch_size:
            item = await self._next_request(deadline - loop.time())
            if item is None:
                break
            if size + len(item[0]) > self.max_batch_size:
                self._carry = item  # opens the next batch
                break
            batch.append(item)
            size += len(item[0])
        return batch

    async def _next_request(self, remaining):
        """A request already waiting, else one that arrives within
        `remaining` seconds, else None. The timeout is for requests yet to
        come: those queued while `predict` ran join the batch even when the
        event loop is too slow to wait for them within it."""
        try:
            return self._queue.get_nowait()
        except asyncio.QueueEmpty:
            pass
        if remaining <= 0:
            return None
        try:
            return await asyncio.wait_for(self._queue.get(), remaining)
        except asyncio.TimeoutError:
            return None

    async def _run(self):
        while True:
            batch = await self._next_batch()
            batch = [(inputs, f) for inputs, f in batch if not f.done()]  # drop timed-out
            if batch:
                await self._predict(batch)

    async def _predict(self, batch):
        flat = [x for inputs, _ in batch for x in inputs]
        self.batch_sizes.append(len(flat))
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(None, self.predict, flat)
            if len(outputs) != len(flat):
                raise ValueError(f"`predict` returned {len(outputs)} outputs for {len(flat)} inputs")
        except Exception as error:  # noqa: BLE001 - handed to the callers
            if len(batch) > 1:  # find the culprits: each request alone
                for item in batch:
                    if not item[1].done():
                        await self._predict([item])
                return
            if not batch[0][1].done():
                batch[0][1].set_exception(error)
            return
        start = 0
        for inputs, future in batch:
            if not future.done():
                future.set_result(outputs[start : start + len(inputs)])
            start += len(inputs)
