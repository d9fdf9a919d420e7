"""Where a tool's work runs (``Tool.isolation``), and a small pool of killable worker processes.

Rule: CPU-bound or untrusted work never runs where it can starve the event loop. Each mode says
what it guarantees when the call's timeout passes or the call is cancelled:

- ``inline``: on the event loop thread. Nothing else of the node runs until the function returns,
  and no timeout can interrupt it. Only for work bounded to microseconds (a worker-thread hop costs
  ~150 µs, more than such a call); async tools are inline by nature and must only await.
- ``thread``: in asyncio's default thread pool (the default for sync functions). The loop keeps
  running while the function runs Python code, which hands the GIL over every few milliseconds;
  C code that holds the GIL (``re``, a huge ``json.dumps``) still stalls it. At the timeout the
  caller stops waiting and gets a ``timeout`` result, **but the thread runs on to its end**:
  Python cannot stop a thread, so its core stays busy and its pool slot taken. For I/O and for
  work with a small, known bound.
- ``process``: in a worker process of a small bounded :class:`WorkerPool`. The loop and the GIL
  stay free; at the timeout, or when the call is cancelled, the worker is killed (SIGKILL) and a
  fresh one takes its slot on demand, so nothing keeps a core busy after its call ended. Workers
  run at a lower CPU priority (``nice``) than the node and under an address-space limit, so a
  runaway allocation fails in the worker, not the machine. Arguments and results cross a pipe
  pickled (JSON-like data: milliseconds per megabyte). The function must be importable by module
  and qualified name in the child (a module-level function, not a lambda, closure or bound
  method) and cannot take a :class:`ToolContext`. Calls beyond the pool size wait for a worker,
  and that wait counts against their timeout.

The pool is process-wide (:func:`default_pool`), started lazily on the first call (a forkserver
that preloads the modules of the process tools, so a replacement worker costs a fork, not an
interpreter start), usable from one event loop at a time (successive loops, as in tests, are
fine), and closed by :func:`close_default_pool` or at interpreter exit. Workers die with their
parent: they are daemonic, and on Linux they get SIGKILL when the forkserver goes away. Besides
the workers, ``multiprocessing`` runs two helpers for the life of the process: the forkserver and
its resource tracker (both exit with the node). As in any ``multiprocessing`` program not using
``fork``, the forkserver imports the main script once (as ``__mp_main__``): a script that starts a
node must keep its entry point under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import importlib
import inspect
import logging
import multiprocessing
import os
import pickle
import signal
import struct
import sys
import threading
import traceback
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Literal, TypeVar, cast

from node.errors import ConfigError, ToolExecutionError

__all__ = [
    "ISOLATION_MODES",
    "Isolation",
    "WorkerPool",
    "close_default_pool",
    "default_pool",
    "function_reference",
    "preload",
    "run_in_process",
]

Isolation = Literal["inline", "thread", "process"]
ISOLATION_MODES: tuple[Isolation, ...] = ("inline", "thread", "process")
DEFAULT_MEMORY_LIMIT_MB = 2048  # address space of one worker
WORKER_NICE = 10  # the node's own threads win the CPU from its workers
_KILL_WAIT_S = 2.0
_HEADER = struct.Struct("!Q")
_READ_CHUNK = 1 << 20
_CLOSED = "the worker pool is closed (the node is shutting down)"

T = TypeVar("T")
logger = logging.getLogger("node.tooling.isolation")

_preload: set[str] = {"node.tooling.isolation"}
_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
_default: WorkerPool | None = None
_lock = threading.Lock()
_atexit_registered = False


def default_size() -> int:
    """Workers of the default pool: one per core, at least 2 and at most 4."""
    return max(2, min(4, os.cpu_count() or 2))


def preload(module: str) -> None:
    """Have the forkserver import ``module`` before forking workers (when it is not started yet)."""
    if module != "builtins":
        _preload.add(module)


def function_reference(function: Callable[..., Any]) -> tuple[str, str]:
    """``(module, qualname)`` under which a worker finds ``function``.

    A :class:`FunctionTool` stands for its function (a ``@tool`` replaces the module's name with
    the tool, and calling the tool calls the function). Raises :class:`ConfigError` for anything
    a child process cannot import: lambdas, closures, bound methods, callable objects.
    """
    target = getattr(function, "__wrapped__", function) if not _is_plain(function) else function
    if not _is_plain(target):
        raise ConfigError(f"{function!r} is not a plain function: a worker process cannot find it")
    module, qualname = target.__module__, target.__qualname__
    if not module or "<locals>" in qualname or "<lambda>" in qualname:
        raise ConfigError(
            f"{module}.{qualname} must be defined at module level to run in a worker process"
        )
    return module, qualname


def _is_plain(function: object) -> bool:
    return inspect.isfunction(function) or inspect.isbuiltin(function)


def _resolve(module: str, qualname: str) -> Callable[..., Any]:
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{module}.{qualname} is not callable")
    return cast(Callable[..., Any], found)


def _check_resolvable(function: Callable[..., Any], module: str, qualname: str) -> None:
    """Fail here, with a clear message, when the child would find something else under the name."""
    try:
        found: Any = _resolve(module, qualname)
    except (ImportError, AttributeError, TypeError) as exc:
        raise ConfigError(f"{module}.{qualname} cannot be imported by name: {exc}") from exc
    if found is not function and getattr(found, "__wrapped__", None) is not function:
        raise ConfigError(f"{module}.{qualname} names another object than the function given")


# --- the worker process -------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, min(_READ_CHUNK, size - len(chunks)))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _die_with_parent() -> None:
    """On Linux, get SIGKILL when the parent (the forkserver) exits; elsewhere rely on daemon."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)


def _limit(memory_limit_mb: int | None, nice: int) -> None:
    import resource

    if memory_limit_mb:
        size = memory_limit_mb * 1024 * 1024
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
    with contextlib.suppress(OSError):
        os.nice(nice)


def _run_job(payload: bytes) -> bytes:
    try:
        module, qualname, args, kwargs = pickle.loads(payload)
        value = _resolve(module, qualname)(*args, **kwargs)
        return pickle.dumps(("ok", value, ""), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # the parent decides what an exception means
        trace = traceback.format_exc()
        try:
            return pickle.dumps(("error", exc, trace), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            stand_in = RuntimeError(f"{type(exc).__name__}: {exc}")
            return pickle.dumps(("error", stand_in, trace), protocol=pickle.HIGHEST_PROTOCOL)


def _worker_main(jobs: Connection, results: Connection, memory_limit_mb: int | None) -> None:
    """A worker's life: read a job, run it, write the outcome; exit when the parent hangs up."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C reaches the whole group; the parent decides
    _limit(memory_limit_mb, WORKER_NICE)
    rfd, wfd = jobs.fileno(), results.fileno()
    while True:
        header = _read_exact(rfd, _HEADER.size)
        if header is None:
            return
        payload = _read_exact(rfd, _HEADER.unpack(header)[0])
        if payload is None:
            return
        reply = _run_job(payload)
        _write_all(wfd, _HEADER.pack(len(reply)) + reply)


# --- the parent side ------------------------------------------------------------------------


class _WorkerGone(Exception):
    """The worker's pipe closed: it died (killed, crashed, out of memory)."""


class _Worker:
    """One worker process and the parent's ends of its two pipes."""

    def __init__(self, context: Any, memory_limit_mb: int | None) -> None:
        job_reader, self._jobs = context.Pipe(duplex=False)
        self._results, result_writer = context.Pipe(duplex=False)
        self._child_ends: tuple[Connection, Connection] | None = (job_reader, result_writer)
        self.process = context.Process(
            target=_worker_main,
            args=(job_reader, result_writer, memory_limit_mb),
            name="a2a-node-worker",
            daemon=True,
        )
        self.pid: int | None = None
        self._killed = False

    def start(self) -> None:
        """Start the process (blocks while a new forkserver preloads: call it off the loop)."""
        self.process.start()
        self.pid = self.process.pid
        assert self._child_ends is not None
        for end in self._child_ends:
            end.close()  # only the child holds them now: its death reads as EOF here
        self._child_ends = None
        os.set_blocking(self._jobs.fileno(), False)
        os.set_blocking(self._results.fileno(), False)

    def alive(self) -> bool:
        return self.pid is not None and self.process.is_alive()

    async def call(self, payload: bytes) -> bytes:
        loop = asyncio.get_running_loop()
        await self._write(loop, _HEADER.pack(len(payload)) + payload)
        return await self._read(loop)

    async def _write(self, loop: asyncio.AbstractEventLoop, data: bytes) -> None:
        fd, view = self._jobs.fileno(), memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await _ready(loop, fd, write=True)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise _WorkerGone from exc

    async def _read(self, loop: asyncio.AbstractEventLoop) -> bytes:
        fd, buffer = self._results.fileno(), bytearray()
        size: int | None = None
        while size is None or len(buffer) < _HEADER.size + size:
            try:
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:
                await _ready(loop, fd, write=False)
                continue
            if not chunk:
                raise _WorkerGone
            buffer += chunk
            if size is None and len(buffer) >= _HEADER.size:
                size = _HEADER.unpack_from(buffer)[0]
        return bytes(buffer[_HEADER.size :])

    def kill(self) -> int | None:
        """Kill and reap the process; return its exit code (idempotent; the pipes stay open, so
        a call reading from them sees the end of the stream)."""
        if self.pid is None:
            return None
        if not self._killed:
            self._killed = True
            with contextlib.suppress(OSError, ValueError):
                if self.process.exitcode is None:
                    self.process.kill()
                self.process.join(_KILL_WAIT_S)
            if self.process.exitcode is None:
                logger.warning("worker %s still alive %.0f s after SIGKILL", self.pid, _KILL_WAIT_S)
        code: int | None = self.process.exitcode
        return code

    def close(self) -> None:
        """Kill the process and close the parent's ends of its pipes."""
        self.kill()
        for conn in (self._jobs, self._results, *(self._child_ends or ())):
            conn.close()


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, write: bool) -> None:
    """Wait until ``fd`` is readable (or writable), without blocking the loop."""
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await future
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


class WorkerPool:
    """At most ``size`` worker processes, started on demand; a call that ends early kills its own.

    ``await pool.run(function, *args, **kwargs)`` runs a module-level function in a worker and
    returns its result, or raises what it raised (with the worker's traceback as a note). When the
    awaiting task is cancelled (a timeout is a cancellation), the worker is killed and reaped
    before the cancellation goes on; the next call gets a fresh worker.
    """

    def __init__(
        self,
        size: int | None = None,
        *,
        memory_limit_mb: int | None = DEFAULT_MEMORY_LIMIT_MB,
        start_method: str = "forkserver",
    ) -> None:
        self.size = size if size is not None else default_size()
        if self.size < 1:
            raise ConfigError("a worker pool needs at least one worker")
        self.memory_limit_mb = memory_limit_mb
        self._context = multiprocessing.get_context(start_method)
        self._idle: list[_Worker] = []
        self._live: set[_Worker] = set()
        self._busy: set[_Worker] = set()
        self._slots = 0  # workers alive or starting
        self._waiters: collections.deque[asyncio.Future[_Worker | None]] = collections.deque()
        self._closed = False
        _pools.add(self)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (busy or idle)."""
        return sorted(w.pid for w in self._live if w.pid is not None)

    @property
    def busy(self) -> list[int]:
        """Process ids of the workers running a call now."""
        return sorted(w.pid for w in self._busy if w.pid is not None)

    async def run(self, function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``function(*args, **kwargs)`` in a worker; see the class docstring."""
        module, qualname = function_reference(function)
        _check_resolvable(function, module, qualname)
        preload(module)
        payload = pickle.dumps((module, qualname, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        worker = await self._acquire()
        healthy = False
        self._busy.add(worker)
        try:
            reply = await worker.call(payload)
            healthy = True
        except _WorkerGone:
            code = worker.kill()
            if self._closed:
                raise ToolExecutionError(_CLOSED) from None
            raise ToolExecutionError(
                f"the worker process running {qualname} died (exit code {code})"
            ) from None
        finally:
            self._busy.discard(worker)
            self._release(worker, healthy=healthy)
        return cast(T, _outcome(reply, qualname))

    async def start(self) -> None:
        """Start every worker now and wait until each answers (a warm-up; optional)."""
        await asyncio.gather(*(self.run(len, ()) for _ in range(self.size - len(self._idle))))

    def close(self) -> None:
        """Kill every worker, busy or idle; calls still running end with an error."""
        self._closed = True
        for worker in list(self._live):
            self._discard(worker)
        self._idle.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_exception(ToolExecutionError(_CLOSED))

    async def _acquire(self) -> _Worker:
        while True:
            if self._closed:
                raise ToolExecutionError(_CLOSED)
            while self._idle:
                worker = self._idle.pop()
                if worker.alive():
                    return worker
                self._discard(worker)
            if self._slots < self.size:
                self._slots += 1
                return await self._start_worker()
            waiter: asyncio.Future[_Worker | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._pass_on(waiter.result())  # handed over just as we were cancelled
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
                raise
            if handed is not None:
                return handed  # else a slot was freed: go round and take it

    async def _start_worker(self) -> _Worker:
        global _atexit_registered
        try:
            worker = _Worker(self._context, self.memory_limit_mb)
            with _lock:
                if not _atexit_registered:
                    atexit.register(_close_all)
                    _atexit_registered = True
                if self._context.get_start_method() == "forkserver":
                    self._context.set_forkserver_preload(["__main__", *sorted(_preload)])
        except BaseException:
            self._free_slot()
            raise
        self._live.add(worker)
        started = asyncio.get_running_loop().run_in_executor(None, worker.start)
        try:
            await asyncio.shield(started)
        except asyncio.CancelledError:
            started.add_done_callback(lambda done: self._adopt(worker, done))
            raise
        except BaseException:
            self._discard(worker)
            raise
        return worker

    def _adopt(self, worker: _Worker, started: asyncio.Future[None]) -> None:
        """A worker whose caller gave up while it started: keep it for the next call."""
        if started.cancelled() or started.exception() is not None:
            self._discard(worker)
        else:
            self._release(worker, healthy=True)

    def _release(self, worker: _Worker, *, healthy: bool) -> None:
        if healthy and not self._closed and worker.alive():
            self._pass_on(worker)
        else:
            self._discard(worker)

    def _pass_on(self, handed: _Worker | None) -> None:
        """Give a worker (or a free slot, ``None``) to the first caller still waiting."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done() and not waiter.get_loop().is_closed():
                waiter.set_result(handed)
                return
        if handed is not None:
            self._idle.append(handed)

    def _discard(self, worker: _Worker) -> None:
        if worker in self._busy:  # its call reads the end of the stream, then discards it again
            worker.kill()
        elif worker in self._live:
            self._live.discard(worker)
            worker.close()
            self._free_slot()

    def _free_slot(self) -> None:
        self._slots -= 1
        if not self._closed:
            self._pass_on(None)


def _outcome(reply: bytes, qualname: str) -> Any:
    try:
        status, value, trace = pickle.loads(reply)
    except Exception as exc:
        raise ToolExecutionError(f"the result of {qualname} could not be read back: {exc}") from exc
    if status == "ok":
        return value
    if isinstance(value, BaseException):
        if trace:
            value.add_note(f"raised in a worker process:\n{trace.rstrip()}")
        raise value
    raise ToolExecutionError(f"{qualname} failed in a worker process")


def default_pool() -> WorkerPool:
    """The process-wide pool that ``isolation="process"`` tools use (created on first use)."""
    global _default
    with _lock:
        if _default is None or _default._closed:
            _default = WorkerPool()
        return _default


def close_default_pool() -> None:
    """Kill the default pool's workers (a node's shutdown; tests). A later call starts anew."""
    global _default
    with _lock:
        pool, _default = _default, None
    if pool is not None:
        pool.close()


def _close_all() -> None:
    for pool in list(_pools):
        pool.close()


async def run_in_process(function: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run a module-level function in the default pool: killed if the awaiting task is cancelled."""
    return await default_pool().run(function, *args, **kwargs)
