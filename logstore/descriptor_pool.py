"""DescriptorPool: the process's file descriptors as one bounded budget for every open segment.

A segment holds up to three descriptors: its `.log` file's and one per mapped index (Python
before 3.13 keeps a duplicate descriptor for each mmap). It counts them in its own
SegmentDescriptors account. The pool is sized from RLIMIT_NOFILE, leaving headroom for sockets,
checkpoints and the interpreter. When a new descriptor would pass its capacity, the least
recently used segment gives its descriptors back; it takes them again on its next use (the
`.log` reopens, the indexes map again with their entry counts kept). No write is lost or
reordered: the bytes sit in the page cache, and a later flush fsyncs files written since.

Who may take back whose descriptors (threads):
- a segment of a Log (its `guard` is the Log's lock): only a thread that gets the lock at once,
  and only if the segment was last used under that lock or by this very thread;
- any other segment: only the thread that used it last.

To use a segment's descriptor outside its Log's lock (a `sendfile`, a read on another thread),
pin it for the duration:

    with segment.pinned() as fd:                 # the `.log` descriptor, opened if needed
        os.sendfile(sock.fileno(), fd, position, count)

`pool.pinned(segment.descriptors)` pins without opening anything. When every descriptor is pinned
or busy, or the process itself is out of them, opening raises DescriptorLimitError naming the
limit and how to raise it (`ulimit -n`, RLIMIT_NOFILE).
"""

from __future__ import annotations

import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

import numpy as np

from index.base import OUT_OF_DESCRIPTORS
from logstore._segment_kernels import SIZE
from logstore.errors import descriptor_limit_error

# A quarter of the descriptor limit (at least MIN_HEADROOM) stays outside the pool: sockets,
# checkpoint writes, directory fsyncs, the interpreter's own files.
HEADROOM_SHARE = 4
MIN_HEADROOM = 32
# The pool's size when the process has no descriptor limit.
UNLIMITED = 1 << 30


class DescriptorHolder(Protocol):
    """What owns an account: it gives its descriptors back on request."""

    def release_descriptors(self) -> None:
        """Close the descriptors not in use (each release is counted in the account)."""


class SegmentDescriptors:
    """One segment's account in the pool: descriptors held, pins, and who used it last."""

    __slots__ = ("pool", "holder", "state", "held", "pins", "guard", "thread", "guarded", "seen", "closing")

    def __init__(self, pool: DescriptorPool, holder: DescriptorHolder, state: np.ndarray) -> None:
        """An empty account of `holder`, whose appends move `state[SIZE]` (they count as use)."""
        self.pool = pool
        self.holder = holder
        self.state = state
        self.held = 0
        self.pins = 0
        #: The lock under which the segment is used (its Log's); None: used by one thread.
        self.guard: threading.RLock | None = None
        self.thread = threading.get_ident()
        self.guarded = False
        self.seen = 0  # state[SIZE] when last placed in the pool's order
        self.closing: list[int] = []  # descriptors closed by their file while pinned

    def acquire(self) -> None:
        """Count one more descriptor, giving back another segment's first when the pool is full;
        DescriptorLimitError when none can be."""
        self.pool.acquire(self)

    def release(self) -> None:
        """Count one descriptor less."""
        self.pool.release(self)

    def close(self, fd: int) -> None:
        """Close `fd` and count it released; while the account is pinned (a send from it is under
        way) that waits for the last unpin, so the number is not reused under the send."""
        with self.pool.lock:
            if self.pins:
                self.closing.append(fd)
                return
        os.close(fd)
        self.release()

    def adopt(self, guard: threading.RLock | None) -> None:
        """From now on the segment is used under `guard` (its Log's lock); whoever used it
        before (the loader, the cleaner that wrote it) is done with it. No-op if it already is."""
        if guard is self.guard:
            return
        with self.pool.lock:
            self.guard = guard
            self.guarded = guard is not None

    def touch(self) -> bool:
        """Mark a use by this thread (call before reading the descriptor or mapping). False when
        another thread may still take the descriptors back during the use (a segment of a Log used
        without its lock, as the cleaner does): the use must then be `pinned()`."""
        me = threading.get_ident()
        guard = self.guard
        guarded = guard is not None and guard._is_owned()
        if self.thread != me or self.guarded != guarded:
            with self.pool.lock:
                self.thread = me
                self.guarded = guarded
        return guarded or guard is None

    def pinned(self) -> AbstractContextManager[SegmentDescriptors]:
        """Keep the descriptors for the `with` (see DescriptorPool.pinned)."""
        return self.pool.pinned(self)


class DescriptorPool:
    """At most `capacity` descriptors held by segments at once, given back least recently used first."""

    def __init__(self, capacity: int) -> None:
        """An empty pool of `capacity` descriptors."""
        if capacity < 1:
            raise ValueError(f"a descriptor pool needs room for one descriptor, got {capacity}")
        self.lock = threading.RLock()
        self._capacity = capacity
        self._in_use = 0
        self._order: OrderedDict[SegmentDescriptors, None] = OrderedDict()  # least recently used first

    @property
    def capacity(self) -> int:
        """Descriptors the pool may hold at once."""
        return self._capacity

    @property
    def in_use(self) -> int:
        """Descriptors held now."""
        return self._in_use

    def account(self, holder: DescriptorHolder, state: np.ndarray) -> SegmentDescriptors:
        """A new, empty account for `holder` (see SegmentDescriptors)."""
        return SegmentDescriptors(self, holder, state)

    def resize(self, capacity: int) -> None:
        """Hold at most `capacity` descriptors from now on, giving back what can be at once."""
        if capacity < 1:
            raise ValueError(f"a descriptor pool needs room for one descriptor, got {capacity}")
        with self.lock:
            self._capacity = capacity
            while self._in_use > capacity and self._give_back_one(None):
                pass

    def acquire(self, account: SegmentDescriptors) -> None:
        """Count a descriptor for `account` (see SegmentDescriptors.acquire)."""
        with self.lock:
            while self._in_use >= self._capacity:
                if not self._give_back_one(account):
                    raise descriptor_limit_error(
                        f"cannot open another file of {account.holder}: all {self._capacity} descriptors "
                        "of the segment pool are pinned or in use by other threads")
            self._in_use += 1
            account.held += 1
            account.seen = int(account.state[SIZE])
            self._order[account] = None
            self._order.move_to_end(account)

    def release(self, account: SegmentDescriptors) -> None:
        """Count a descriptor of `account` as closed."""
        with self.lock:
            account.held -= 1
            self._in_use -= 1
            if not account.held:
                self._order.pop(account, None)

    @contextmanager
    def pinned(self, account: SegmentDescriptors) -> Iterator[SegmentDescriptors]:
        """Keep `account`'s descriptors (those it holds and those it opens meanwhile) until the
        `with` ends: for a send or read outside the segment's Log lock. A file closed meanwhile
        (its segment deleted) closes its descriptor at the last unpin."""
        with self.lock:
            account.pins += 1
        try:
            yield account
        finally:
            with self.lock:
                account.pins -= 1
                closing: list[int] = []
                if not account.pins:
                    closing, account.closing = account.closing, []
            for fd in closing:
                os.close(fd)
                self.release(account)

    def _give_back_one(self, requester: SegmentDescriptors | None) -> bool:
        """Make the least recently used segment that may give its descriptors back do so; one
        appended to since it was placed is moved to the back instead (it was used)."""
        me = threading.get_ident()
        for _ in range(2 * len(self._order)):
            if not self._order:
                return False
            account = next(iter(self._order))
            self._order.move_to_end(account)
            if account is requester or account.pins:
                continue
            size = int(account.state[SIZE])
            if size != account.seen:
                account.seen = size
                continue
            if self._take_back(account, me):
                return True
        return False

    def _take_back(self, account: SegmentDescriptors, me: int) -> bool:
        held = account.held
        guard = account.guard
        if guard is None:
            if account.thread != me:
                return False
            account.holder.release_descriptors()
            return account.held < held
        if not (account.guarded or account.thread == me) or not guard.acquire(blocking=False):
            return False
        try:
            account.holder.release_descriptors()
        finally:
            guard.release()
        return account.held < held


def capacity_for(limit: int) -> int:
    """The pool's capacity under a descriptor limit of `limit`: the limit less the headroom."""
    if limit == resource.RLIM_INFINITY:
        return UNLIMITED
    return max(limit - max(limit // HEADROOM_SHARE, MIN_HEADROOM), 1)


@contextmanager
def named_descriptor_errors(what: str) -> Iterator[None]:
    """Raise DescriptorLimitError naming `what` and the limit for an OSError of the process
    being out of descriptors (EMFILE, ENFILE) inside (a checkpoint, a lock, a directory)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in OUT_OF_DESCRIPTORS:
            raise descriptor_limit_error(what) from exc
        raise


_process_pool: DescriptorPool | None = None
_process_pool_lock = threading.Lock()


def process_pool() -> DescriptorPool:
    """The pool every segment of this process counts in, sized on first use from RLIMIT_NOFILE."""
    global _process_pool
    if _process_pool is None:
        with _process_pool_lock:
            if _process_pool is None:
                soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                _process_pool = DescriptorPool(capacity_for(soft))
    return _process_pool

