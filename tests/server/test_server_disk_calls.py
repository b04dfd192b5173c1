"""on_disk: a call on the disk thread, awaited on the event loop as run_in_executor's would be,
in the order the calls were made."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from logstore.errors import OffsetOutOfRangeError
from logstore.server.disk_calls import on_disk


@pytest.fixture
def disk():
    executor = ThreadPoolExecutor(1, thread_name_prefix="test-disk")
    yield executor
    executor.shutdown(wait=True)


def test_the_call_runs_on_the_disk_thread_and_its_result_is_awaited(disk):
    async def main():
        return await on_disk(disk, lambda a, b: (threading.current_thread().name, a + b), 2, 3)

    name, total = asyncio.run(main())
    assert name.startswith("test-disk") and total == 5


def test_the_calls_run_in_the_order_they_were_made(disk):
    done: list[int] = []

    async def main():
        return await asyncio.gather(*(on_disk(disk, lambda i=i: done.append(i) or i) for i in range(200)))

    assert asyncio.run(main()) == list(range(200))
    assert done == list(range(200))


def test_the_calls_exception_is_raised_in_the_awaiting_task(disk):
    def refuse():
        raise OffsetOutOfRangeError("offset 9 is out of range")

    async def main():
        with pytest.raises(OffsetOutOfRangeError, match="offset 9"):
            await on_disk(disk, refuse)

    asyncio.run(main())


def test_a_call_cancelled_before_the_disk_thread_reaches_it_is_not_made(disk):
    release = threading.Event()
    made: list[str] = []

    async def main():
        blocker = on_disk(disk, release.wait, 10)
        queued = on_disk(disk, made.append, "queued")
        queued.cancel()
        release.set()
        await blocker
        assert await on_disk(disk, made.append, "after") is None

    asyncio.run(main())
    assert made == ["after"]


def test_a_call_whose_awaiter_gave_up_while_it_ran_is_finished_without_an_error(disk):
    started, release = threading.Event(), threading.Event()
    made: list[str] = []

    def slow():
        started.set()
        release.wait(10)
        made.append("slow")
        return "late"

    async def main():
        call = on_disk(disk, slow)
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        call.cancel()
        release.set()
        await on_disk(disk, made.append, "next")  # the slow call's settling ran before this one's
        assert call.cancelled()

    asyncio.run(main())
    assert made == ["slow", "next"]
