"""Deadlines for plug-in code: an answer in time comes back, a late one is said to be
late (as a value, never as an error a plug-in could raise itself), the code's own errors
pass through, and a producer stops when its consumer does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from flexmatch import deadlines


def test_a_coroutine_answers_or_is_late() -> None:
    async def quick() -> int:
        return 7

    async def late() -> int:
        await asyncio.sleep(30)
        return 0

    async def own_timeout() -> int:
        raise TimeoutError("the plug-in's own")

    async def main() -> None:
        assert await deadlines.run_coroutine(quick, 5) == (True, 7)
        assert await deadlines.run_coroutine(late, 0.2) == (False, None)
        with pytest.raises(TimeoutError, match="the plug-in's own"):
            await deadlines.run_coroutine(own_timeout, 5)
        assert await deadlines.within(quick(), 5) == (True, 7)
        assert await deadlines.within(late(), 0.1) == (False, None)

    asyncio.run(main())


def test_bounded_limits_the_wait_not_the_consumer() -> None:
    gate = threading.Event()
    made: list[int] = []

    def endless() -> Iterator[int]:
        index = 0
        while True:
            made.append(index)
            yield index
            index += 1

    def stuck() -> Iterator[int]:
        yield 1
        gate.wait(30)
        yield 2

    def broken() -> Iterator[int]:
        yield 1
        raise ValueError("bad item")

    items = deadlines.Bounded(endless, 5)
    assert [next(items) for _ in range(3)] == [0, 1, 2]
    items.close()
    stopped = len(made)
    assert stopped <= 5 and not items.overdue
    late = deadlines.Bounded(stuck, 0.3)
    assert list(late) == [1] and late.overdue
    gate.set()
    with pytest.raises(ValueError, match="bad item"):
        list(deadlines.Bounded(broken, 5))
    whole = deadlines.Bounded(lambda: [1, 2, 3], 5)
    assert list(whole) == [1, 2, 3] and not whole.overdue
    assert len(made) <= stopped + 1  # the endless producer stopped when asked
