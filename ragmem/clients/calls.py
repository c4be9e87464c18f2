"""The one call policy of every client that calls an endpoint: the LLM judge and the embeddings client
(:mod:`ragmem.clients.llm_client`), the HTTP agent (:mod:`ragmem.agents.runner`), the reference agent's retriever
embeddings and its chat generator (:mod:`ragmem.reference`).

- **What is retried** (:func:`transient`): 429, 5xx other than 501, timeouts, connection errors. 400,
  401, 403, 404, 422 and 501 are answers no retry changes. A timeout is retried once: a request that
  ran out of time runs out again.
- **How long to wait** (:meth:`Policy.wait`): the server's ``Retry-After`` when it sends one, else
  exponential backoff with jitter, ``backoff_s * 2**(attempt - 1) * U(0.5, 1.5)``; at most 60 s.
- **The circuit breaker** (:class:`ragmem.clients.endpoints.Breaker`): every attempt feeds the endpoint's
  breaker (:func:`endpoint_failure` says whether the endpoint itself failed); once it is open no
  attempt is made and :class:`ragmem.clients.endpoints.EndpointDown` stops the run.
- **The failure line** (:func:`describe`): one line per failed item, the same for every client and
  every library underneath (the openai SDK, httpx): ``cannot connect (Connection refused)``,
  ``timed out``, ``HTTP 503: <the reply's first line>``, else ``Type: message``.

The SDKs' own retries are off everywhere (``max_retries=0``): they would bypass the breaker.
Written here rather than with tenacity: the breaker's state is shared by every call to an endpoint,
across threads and event loops, and the same loop runs synchronously (threads) and asynchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import threading
import time
from dataclasses import dataclass
from typing import AbstractSet, Any, Awaitable, Callable, Coroutine, Iterator, Sequence, TypeVar

from ragmem.clients.endpoints import Breaker, EndpointDown
from ragmem.errors import escaped_surrogates, failure_message
from ragmem.runtime import interrupts

T = TypeVar("T")

MAX_WAIT_S = 60.0


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries (the openai SDK's, httpx's, an HTTP agent's), if any."""
    for attr in ("status_code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or type(exc).__name__ in ("APITimeoutError", "TimeoutException",
                                                                    "ReadTimeout", "ConnectTimeout", "WriteTimeout",
                                                                    "PoolTimeout")


class NotOpenAI(Exception):
    """An endpoint answered a request with what an OpenAI-compatible server never sends (a reply that
    is not JSON: a web page, another API): the URL names another kind of server. No retry fixes it."""

    def __init__(self, reply: str):
        shown = " ".join(str(reply).split())
        super().__init__(f"not an OpenAI-compatible server: the reply is not JSON "
                         f"({shown[:80]!r}{'...' if len(shown) > 80 else ''})")


async def json_reply(request: Callable[[], Any]) -> Any:
    """The openai SDK's reply to ``request()``; a reply that is not JSON (the SDK hands its text over
    as a ``str``: a web page, another kind of server) raises :class:`NotOpenAI`."""
    reply = await request()
    if isinstance(reply, str):
        raise NotOpenAI(reply)
    return reply


def _is_connection(exc: BaseException) -> bool:
    """A failure below HTTP: refused, reset, DNS, TLS (the openai SDK's APIConnectionError, httpx's
    TransportError, Python's ConnectionError)."""
    if _is_timeout(exc):
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"APIConnectionError", "TransportError"}) or isinstance(exc, ConnectionError)


def transient(exc: BaseException) -> bool:
    """Whether a retry may succeed: 429, 5xx but 501, timeouts, connection errors."""
    if _is_timeout(exc) or _is_connection(exc):
        return True
    status = status_of(exc)
    return status is not None and (status == 429 or (status >= 500 and status != 501))


def endpoint_failure(exc: BaseException) -> bool | None:
    """For the breaker: True when the endpoint itself failed (connection refused, reset, DNS, TLS;
    401/403/404), False for another failure (a timeout, 429, 5xx), None when the endpoint answered
    and the failure is about this request (400, 422, a reply that is not what was asked for)."""
    if _is_timeout(exc):
        return False
    if _is_connection(exc) or isinstance(exc, NotOpenAI):
        return True
    status = status_of(exc)
    if status is None:
        return None
    if status in (401, 403, 404):
        return True
    return False if status >= 429 else None


def wrong_setting(exc: BaseException) -> bool:
    """Whether the answer says the endpoint's setting is wrong, so no wait or resume with it helps:
    a path (404) or key (401, 403) refused, or a server of another kind (:class:`NotOpenAI`)."""
    return isinstance(exc, NotOpenAI) or status_of(exc) in (401, 403, 404)


def retry_after(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` in seconds (its delay-seconds form), if it sent one."""
    value = getattr(exc, "retry_after", None)
    if value is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        value = headers.get("retry-after") if headers is not None and hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _root_cause(exc: BaseException) -> BaseException:
    """The operating system's error behind a wrapped one (httpx's, the SDK's), else the deepest cause."""
    seen = set()
    while True:
        if isinstance(exc, OSError) and (exc.errno or exc.strerror):
            return exc
        nxt = exc.__cause__ or exc.__context__
        if nxt is None or id(nxt) in seen:
            return exc
        seen.add(id(exc))
        exc = nxt


def _reply_message(text: str) -> str:
    """What an error reply says: its JSON ``error.message``, ``message``, ``detail`` or ``error``
    (the shapes of OpenAI-compatible servers and of web frameworks), else its first 160 characters."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        for value in ((error or {}).get("message") if isinstance(error, dict) else error,
                      body.get("message"), body.get("detail")):
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())[:160]
    return " ".join(text.split())[:160]


def describe(exc: BaseException) -> str:
    """The one failure line of a failed call, whatever the library underneath (a reply's text quoted
    in it: each lone surrogate shown escaped, as in every recorded failure)."""
    return escaped_surrogates(_described(exc))


def _described(exc: BaseException) -> str:
    if _is_timeout(exc):
        return "timed out"
    if isinstance(exc, NotOpenAI):
        return str(exc)
    if _is_connection(exc):
        root = _root_cause(exc)
        errno = getattr(root, "errno", None)  # (asyncio words a refused connection its own way)
        reason = (os.strerror(errno) if isinstance(errno, int) else getattr(root, "strerror", None)) \
            or (str(root).splitlines() or [""])[0] or type(root).__name__
        if isinstance(root, RuntimeError) or "event loop" in reason:  # the client library's own state, not the server's
            reason = "the connection ended before a reply"
        return f"cannot connect ({reason})"[:240]
    status = status_of(exc)
    if status is not None:
        text = getattr(exc, "reply_text", None)
        if text is None:
            response = getattr(exc, "response", None)
            try:
                text = response.text if response is not None else ""
            except Exception:  # a streamed reply not read
                text = ""
        message = _reply_message(str(text))
        return f"HTTP {status}: {message}" if message else f"HTTP {status}"
    return failure_message(exc)[:240]


@dataclass(frozen=True)
class Policy:
    """How many times, and how long apart, a transient failure is retried."""

    retries: int = 4          # attempts after the first
    backoff_s: float = 1.0    # the first backoff, doubling, jittered
    timeout_retries: int = 1  # of which at most this many after a timeout

    def wait(self, attempt: int, exc: BaseException) -> float:
        """Seconds before the next attempt (``attempt``: the one that just failed, from 1)."""
        after = retry_after(exc)
        if after is None:
            after = self.backoff_s * (2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
        return max(0.0, min(after, MAX_WAIT_S))


class Attempts:
    """The attempts of one call: each outcome feeds the breaker; after a failure, whether (and when)
    to try again. Used by :func:`call` and :func:`call_async`, and by the agent runner's own loop
    (which times each attempt)."""

    def __init__(self, policy: Policy, breaker: Breaker | None, retryable: Callable[[BaseException], bool] = transient):
        self.policy, self.breaker, self.retryable = policy, breaker, retryable
        self.count = 0
        self.timeouts = 0

    def start(self) -> None:
        """Before an attempt: raises :class:`ragmem.clients.endpoints.EndpointDown` when the breaker is open."""
        if self.breaker is not None:
            self.breaker.check()
        self.count += 1

    def succeeded(self) -> None:
        if self.breaker is not None:
            self.breaker.success()

    def failed(self, exc: BaseException) -> float | None:
        """The wait before the next attempt, or ``None``: give up (the caller re-raises ``exc``).
        Raises :class:`ragmem.clients.endpoints.EndpointDown` when this failure opened the breaker."""
        if self.breaker is not None:
            kind = endpoint_failure(exc)
            if kind is None:
                self.breaker.success()  # the endpoint answered: it is up
            else:
                self.breaker.failure(describe(exc), kind, slow=_is_timeout(exc), wrong_setting=wrong_setting(exc))
                self.breaker.check()
        self.timeouts += _is_timeout(exc)
        if isinstance(exc, EndpointDown):  # an endpoint already declared down is not asked again
            return None
        if not self.retryable(exc) or self.count > self.policy.retries or self.timeouts > self.policy.timeout_retries:
            return None
        return self.policy.wait(self.count, exc)


class Spent(Exception):
    """A request not sent: the budget it would have spent past is spent (never retried)."""


class Allowance:
    """The requests an endpoint's section (``judge``) may send while it is installed (:meth:`installed`),
    across every client and thread of the process: each request (every attempt, a retry too) takes one
    before it is sent, and once ``requests`` are sent the next raises :class:`Spent`. ``requests`` None:
    counted, never refused.

    ``usd`` (a dollar budget): each attempt is taken at the most it could cost (:func:`most_usd`) before
    it is sent, and refused when that would pass ``usd``; once its reply says what it cost, the
    reservation is replaced by the cost (:meth:`settle`). An attempt with no reply (it failed) stays
    counted at its most: the budget is never passed, at the price of ending a little early."""

    _active: dict[str, "Allowance"] = {}

    def __init__(self, section: str, requests: int | None, setting: str = "the budget", usd: float | None = None,
                 usd_setting: str = "the budget"):
        self.section, self.requests, self.setting = section, requests, setting
        self.usd, self.usd_setting = usd, usd_setting
        self.sent = 0
        self.refused = 0
        self.spent_usd = 0.0  # replies' costs, and the most of attempts with none (or still in flight)
        self._lock = threading.Lock()

    def take(self, most_usd: float = 0.0) -> None:
        with self._lock:
            if self.requests is not None and self.sent >= self.requests:
                self.refused += 1
                raise Spent(f"not sent: {self.setting} {self.requests} spent")
            if self.usd is not None and self.spent_usd + most_usd > self.usd:
                self.refused += 1
                raise Spent(f"not sent: {self.usd_setting} {self.usd:g} spent (${self.spent_usd:.4f} so far; this "
                            f"request could cost up to ${most_usd:.4f})")
            self.sent += 1
            self.spent_usd += most_usd

    @staticmethod
    def settle(section: str, most_usd: float, cost_usd: float) -> None:
        """A reply's cost known: its attempt's reservation ``most_usd`` replaced by ``cost_usd``."""
        found = Allowance._active.get(section)
        if found is not None:
            with found._lock:
                found.spent_usd += cost_usd - most_usd

    @contextlib.contextmanager
    def installed(self) -> Iterator["Allowance"]:
        Allowance._active[self.section] = self
        try:
            yield self
        finally:
            Allowance._active.pop(self.section, None)

    @staticmethod
    def spend(section: str, most_usd: float = 0.0) -> None:
        """One request of ``section`` about to be sent: taken from its allowance, if one is installed."""
        found = Allowance._active.get(section)
        if found is not None:
            found.take(most_usd)


#: tokens a chat request may spend besides its messages' text (a role and delimiters per message)
TOKENS_PER_MESSAGE = 16


def most_usd(messages: Sequence[dict[str, Any]], max_tokens: int, price: Any) -> float:
    """The most a chat request could cost at ``price`` (USD per million tokens in and out; ``None``: 0):
    its messages' UTF-8 bytes as input tokens (a byte-level BPE token holds at least one byte, so no
    tokenizer of that kind counts more), :data:`TOKENS_PER_MESSAGE` more a message, and ``max_tokens``
    of output."""
    if price is None:
        return 0.0
    tokens_in = sum(len(str(m.get("content", "")).encode()) + TOKENS_PER_MESSAGE for m in messages)
    return price.usd(tokens_in, max_tokens)


def rejects_format(exc: Exception) -> bool:
    """An HTTP 400 that names the response format: the cue to fall back to the next format."""
    text = str(exc).lower()
    return status_of(exc) == 400 and ("response_format" in text or "json_schema" in text or "json_object" in text)


def call(fn: Callable[[], T], policy: Policy, breaker: Breaker | None = None,
         on_attempt: Callable[[], None] | None = None) -> T:
    """``fn()`` under the policy, from synchronous code (threads)."""
    attempts = Attempts(policy, breaker)
    while True:
        attempts.start()
        if on_attempt is not None:
            on_attempt()
        try:
            result = fn()
        except Exception as exc:
            wait = attempts.failed(exc)
            if wait is None:
                raise
            time.sleep(wait)
        else:
            attempts.succeeded()
            return result


async def call_async(fn: Callable[[], Awaitable[T]], policy: Policy, breaker: Breaker | None = None,
                     on_attempt: Callable[[], None] | None = None) -> T:
    """``await fn()`` under the policy, from an event loop."""
    attempts = Attempts(policy, breaker)
    while True:
        if interrupts.STOP.is_set():  # the run is stopping: a request not sent yet is not sent
            raise asyncio.CancelledError()
        attempts.start()
        if on_attempt is not None:
            on_attempt()
        try:
            result = await fn()
        except Exception as exc:
            if _stopping():  # the request failed because the run is being interrupted: not the endpoint's fault
                raise asyncio.CancelledError() from None
            wait = attempts.failed(exc)
            if wait is None:
                raise
            await asyncio.sleep(wait)
        else:
            attempts.succeeded()
            return result


def _stopping() -> bool:
    """This task is being cancelled (Ctrl+C or SIGTERM reached the event loop) or a stop was requested:
    a request that fails now failed because of it, and is neither retried nor held against the endpoint."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling and cancelling()) or interrupts.STOP.is_set()


def policy_of(settings: Any) -> Policy:
    """The policy an endpoint's settings ask for (``max_retries``/``retries``, ``retry_backoff_s``)."""
    retries = getattr(settings, "max_retries", None)
    if retries is None:
        retries = getattr(settings, "retries", 0)
    return Policy(retries=int(retries or 0), backoff_s=float(getattr(settings, "retry_backoff_s", 1.0)))


#: how long a stopped run waits for the requests it had already sent (their replies are paid for:
#: kept in the cache, so the resume does not send them again)
GRACE_S = 5.0


def run_loop(main: Coroutine[Any, Any, T], sending: AbstractSet[Any], grace_s: float = GRACE_S) -> T:
    """``main`` run to completion on an event loop of its own (``asyncio.run``, but a stop is not a
    loss). On Ctrl+C or SIGTERM the requests already sent (the tasks in ``sending``) are given
    ``grace_s`` to finish, and their replies are kept; the others are not sent (:func:`call_async`
    sees :data:`ragmem.runtime.interrupts.STOP`); then the signal is raised again where the handler
    it replaced for the while (a ragmem command's, Python's) raises it, outside the loop. In the main
    thread the signal is taken by the loop (a handler raising inside a request's task would lose
    that request); elsewhere a stop raised out of the loop gets the same grace. A second signal
    stops at once."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(main)
    received: list[int] = []
    already = interrupts.STOP.is_set()

    async def wind_down() -> None:  # the stop: no request starts (call_async), the ones sent get their grace
        interrupts.STOP.set()
        pending = [t for t in sending if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        task.cancel()

    def on_signal(signum, frame) -> None:  # (not raising: the loop is told)
        received.append(signum)
        first = len(received) == 1  # (decided now: a second signal before the loop sees the first stops at once)
        loop.call_soon_threadsafe((lambda: loop.create_task(wind_down())) if first else task.cancel)

    swapped = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            swapped[signum] = signal.signal(signum, on_signal)
    try:
        return loop.run_until_complete(task)
    except asyncio.CancelledError:
        if not received:
            raise
    except BaseException:  # a stop raised out of the loop (another thread's loop, a handler that raised)
        try:
            loop.run_until_complete(wind_down())
        finally:
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise
    finally:
        for signum, handler in swapped.items():
            signal.signal(signum, handler)
        if not already:
            interrupts.STOP.clear()
        with contextlib.suppress(Exception):
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    signal.raise_signal(received[0])  # the handler put back raises it (a ragmem command: one line, 130/143)
    raise KeyboardInterrupt  # (a handler that did not raise: the stop goes on all the same)
