"""Per-API control hooks of one node, for fault-injection tests (kfake's ControlKey, librdkafka's
`rd_kafka_mock_push_request_errors`): before a request reaches its handler, a hook for its API
key may answer it with an error code, hold it for a while, drop the connection, or only observe
it; each hook answers a number of requests (one by default) or every one until removed.

The same object also holds the node's cut links: requests sent by a node whose link to this one
is cut, or by clients while this node's client link is cut, lose their connection as a broken
network would lose them. Nodes are told apart from clients by the client ids their channels use
(`kraft.node_channel.sender_node`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from logstore.server.kraft.node_channel import sender_node
from logstore.server.protocol import Request

DROP = False  # what `handle` returns to close the connection unanswered


@dataclass(frozen=True)
class Answer:
    """Answer with `error_code` in every error field of a response shaped like the request
    (every topic and partition it names), without handling it."""

    error_code: int


@dataclass(frozen=True)
class Delay:
    """Hold the request `seconds` before handling it as usual."""

    seconds: float


@dataclass(frozen=True)
class Drop:
    """Close the connection without answering (the client sees a broken connection)."""


@dataclass(frozen=True)
class Observe:
    """Handle the request as usual; the hook only records it."""


Action = Answer | Delay | Drop | Observe


@dataclass(eq=False)
class Hook:
    """One control: requests of API `api_key` (on the nodes it is installed on) get `action`,
    `times` of them (None: every one until `remove()`). `requests` holds every request it took,
    as (node id, Request)."""

    api_key: int
    action: Action
    times: int | None = 1
    requests: list[tuple[int, Request]] = field(default_factory=list)
    _installed: list[ControlHooks] = field(default_factory=list, repr=False)
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def take(self, node_id: int, request: Request) -> bool:
        """Whether this hook takes `request` (counting it against `times`)."""
        with self._cond:
            if self.times is not None and len(self.requests) >= self.times:
                return False
            self.requests.append((node_id, request))
            self._cond.notify_all()
            return True

    @property
    def exhausted(self) -> bool:
        """Whether the hook has taken every request it was for."""
        with self._cond:
            return self.times is not None and len(self.requests) >= self.times

    def wait(self, count: int = 1, timeout_s: float = 30) -> list[tuple[int, Request]]:
        """Block until the hook has taken `count` requests; TimeoutError after `timeout_s`."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout_s):
                raise TimeoutError(f"the hook on api {self.api_key} took {len(self.requests)} of {count} requests")
            return list(self.requests)

    def remove(self) -> None:
        """Uninstall the hook from every node it is on (requests in flight finish as they were)."""
        for hooks in list(self._installed):
            hooks.remove(self)


class ControlHooks:
    """The hooks and cut links of node `node_id`; its connections hand every request to `handle`."""

    def __init__(self, node_id: int = -1):
        self.node_id = node_id
        self._hooks: list[Hook] = []
        self._cut: set[int | None] = set()  # the nodes cut off, None standing for the clients
        self._lock = threading.Lock()

    def add(self, hook: Hook) -> Hook:
        """Install `hook` (first installed, first asked)."""
        with self._lock:
            self._hooks.append(hook)
            hook._installed.append(self)
        return hook

    def remove(self, hook: Hook) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)
                hook._installed.remove(self)

    def cut(self, node_id: int | None) -> None:
        """Lose every request from node `node_id` (None: from clients) until `heal`."""
        with self._lock:
            self._cut.add(node_id)

    def heal(self, node_id: int | None) -> None:
        """Undo `cut(node_id)`."""
        with self._lock:
            self._cut.discard(node_id)

    async def handle(self, request: Request, handler: Callable[[Request], Awaitable[Any]]) -> Any:
        """`request`'s response: `handler`'s, unless a hook answers or holds it; DROP to close
        the connection instead (a hook's Drop, or a link cut before the request came or before
        its answer left, as a long-polling fetch's answer is lost when the link breaks); None
        for an acks=0 Produce a hook answers. Every Observe hook of the API sees the request;
        of the others, the first installed that takes it acts."""
        if self._is_cut(request):
            return DROP
        action = self._action(request)
        if isinstance(action, Drop):
            return DROP
        if isinstance(action, Answer):
            return None if getattr(request.body, "acks", None) == 0 else error_response(request, action.error_code)
        if isinstance(action, Delay):
            await asyncio.sleep(action.seconds)
        response = await handler(request)
        return DROP if self._is_cut(request) else response

    def _action(self, request: Request) -> Action | None:
        """What the hooks do with `request` (None: nothing but observe it); spent hooks go."""
        with self._lock:
            hooks = [h for h in self._hooks if h.api_key == request.api_key]
        action = None
        for hook in hooks:
            if (isinstance(hook.action, Observe) or action is None) and hook.take(self.node_id, request):
                action = action if isinstance(hook.action, Observe) else hook.action
                if hook.exhausted:
                    hook.remove()
        return action

    def _is_cut(self, request: Request) -> bool:
        with self._lock:
            return bool(self._cut) and sender_node(request.client_id) in self._cut


# Fields naming what a request is about, by the entity they name: a response mirrors the
# request's entries through them (Produce's topic `name` and partition `index` become the
# response's `name` and `index`, Fetch's `partition` its `partition_index`).
IDENTITY = {"name": "topic", "topic": "topic", "topic_name": "topic", "topic_id": "topic_id",
            "index": "partition", "partition": "partition", "partition_index": "partition",
            "group_id": "group", "transactional_id": "transactional_id", "resource_type": "resource_type",
            "resource_name": "resource_name", "member_id": "member", "key": "key"}


def error_response(request: Request, error_code: int) -> Any:
    """A response to `request` with `error_code` in each error field, one entry for each topic,
    partition, group or resource the request names (as Kafka's getErrorResponse builds one)."""
    response = request.response()
    _mirror(request.body, response, error_code)
    return response


def _mirror(source: Any, target: Any, error_code: int) -> None:
    """Fill `target` (a response struct) from `source` (the request struct it answers)."""
    by_entity = {IDENTITY[n]: getattr(source, n) for n in source.fields if n in IDENTITY}
    for name, spec in target.fields.items():
        if name.endswith("error_code"):
            setattr(target, name, error_code)
        elif name in IDENTITY and IDENTITY[name] in by_entity:
            setattr(target, name, by_entity[IDENTITY[name]])
        elif spec.is_struct_array():
            entries = _entries_answered(source, spec)
            if entries is not None:
                items = []
                for entry in entries:
                    item = spec.data_class()
                    _mirror(entry, item, error_code)
                    items.append(item)
                setattr(target, name, items)


def _entries_answered(source: Any, spec: Any) -> list | None:
    """The request's array whose entries the response array `spec` answers: the one whose
    entries name the same kind of thing (a topic, a partition, a group)."""
    wanted = {IDENTITY[n] for n in spec.fields if n in IDENTITY}
    for name, field_spec in source.fields.items():
        value = getattr(source, name)
        if field_spec.is_struct_array() and value and wanted & {IDENTITY[n] for n in field_spec.fields
                                                                  if n in IDENTITY}:
            return value
    return None
