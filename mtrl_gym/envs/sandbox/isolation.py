"""A best-effort guard that keeps in-process tools off the network and out of your files.

While a tool runs inside :func:`sandbox_guard`, these standard-library entry points refuse
(raise :class:`SandboxViolation`, a :class:`PermissionError`) unless the guard allows them:

* **network** — ``socket.socket.connect`` / ``connect_ex`` / ``bind`` / ``sendto`` / ``sendmsg``,
  ``socket.create_connection``, ``socket.getaddrinfo`` and the ``gethostby*`` look-ups
  (so ``urllib``, ``http.client``, ``requests`` and DNS look-ups are refused);
* **writes outside the allowed directories** — ``open`` / ``io.open`` in a writing mode
  (``w``, ``a``, ``x``, ``+``), ``os.open`` with writing flags, and ``os.remove``,
  ``unlink``, ``rename``, ``replace``, ``mkdir``, ``rmdir``, ``truncate``, ``chmod``,
  ``chown``, ``lchown``, ``link``, ``symlink``, ``utime``, ``mkfifo``, ``mknod``, the
  descriptor forms ``fchmod``, ``fchown``, ``ftruncate`` and the ``*xattr`` writes (so
  ``pathlib`` and ``shutil`` writes are covered too). Paths are resolved with
  ``os.path.realpath`` and descriptors through ``/proc/self/fd``, so ``..``, symlinks and a
  descriptor opened read-only on an outside file do not escape; ``os.devnull`` is always
  writable;
* **new processes** — ``subprocess.Popen``, ``os.system``, ``os.fork``, ``os.forkpty``,
  ``os.posix_spawn[p]`` and ``os.exec*``.

Reading files is always allowed. Every refusal is also recorded on the guard's
:class:`GuardReport`, so the environment reports it even when the tool catches the error.

Thread safety: the patches are installed when the first guard starts and removed when
the last one ends (reference-counted, under a lock), and each patched function checks
the guard of the *calling thread* only: other threads (a trainer, a data loader) are
never affected, and guards in different threads do not see each other.

What it does **not** protect against (it is a seat belt for honest tools, not a security
boundary for hostile code): C extensions and ``ctypes`` calling the OS directly;
``_socket`` / ``_io.FileIO`` / ``posix`` used directly; writes through file descriptors
opened before the guard started; threads or processes the tool starts (their calls are
not checked); ``multiprocessing`` workers already running; code that restores the patched
functions itself; resource exhaustion (CPU, memory, time). Run untrusted tools in a
container or a separate process with OS-level sandboxing.

>>> import socket
>>> with sandbox_guard(tool="demo") as report:
...     try:
...         socket.create_connection(("127.0.0.1", 9))
...     except SandboxViolation as e:
...         print(e.kind)
network
>>> len(report.violations)
1
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtrl_gym.error import Error

__all__ = ["sandbox_guard", "SandboxViolation", "GuardReport", "suspended", "is_installed"]

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SandboxViolation(Error, PermissionError):
    """A guarded tool tried to reach the network, write outside its directory, or start a process."""

    def __init__(self, kind: str, detail: str, tool: str):
        self.kind = kind
        self.detail = detail
        self.tool = tool
        what = {"network": "reach the network", "write": "write outside its work directory",
                "subprocess": "start a process"}[kind]
        flag = {"network": "network=True", "write": "writes=True", "subprocess": "subprocess=True"}[kind]
        super().__init__(f"Refused: tool {tool} tried to {what} ({detail}); this sandbox does not allow it. "
                         f"A tool that needs this must declare @tool({flag}).")


@dataclass
class GuardReport:
    """What one guarded call attempted: the refused operations, in order."""

    tool: str
    network: bool
    writes: bool
    subprocess: bool
    write_roots: Sequence[str | os.PathLike | Callable[[], Any]] = ()
    violations: list[SandboxViolation] = field(default_factory=list)

    def _refuse(self, kind: str, detail: str) -> SandboxViolation:
        err = SandboxViolation(kind, detail, self.tool)
        self.violations.append(err)
        return err

    def _roots(self) -> list[str]:
        roots = []
        for r in self.write_roots:
            r = r() if callable(r) else r
            if r is not None:
                roots.append(os.path.realpath(os.fspath(r)))
        return roots


_local = threading.local()
_lock = threading.Lock()
_installed = 0


def _active() -> GuardReport | None:
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def sandbox_guard(*, tool: str = "tool", network: bool = False, writes: bool = False, subprocess: bool = False,
                  write_roots: Sequence[str | os.PathLike | Callable[[], Any]] = ()) -> Iterator[GuardReport]:
    """Guard the calling thread while the ``with`` block runs; yields the :class:`GuardReport`.

    Args:
        tool: name used in refusal messages.
        network, writes, subprocess: allow that kind of operation.
        write_roots: directories (or callables returning one, or None) where writes are
            allowed even without ``writes``.
    """
    report = GuardReport(tool=tool, network=network, writes=writes, subprocess=subprocess,
                         write_roots=tuple(write_roots))
    _install()
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(report)
    try:
        yield report
    finally:
        stack.pop()
        _uninstall()


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Lift the calling thread's guard for the block (used by the sandbox's own bookkeeping)."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(None)
    try:
        yield
    finally:
        stack.pop()


# ------------------------------------------------------------------------------- checks


def _path_text(path: Any, dir_fd: int | None = None) -> str | None:
    """The resolved path of a path-like argument or of an open file descriptor."""
    if isinstance(path, int) and not isinstance(path, bool):
        try:  # a descriptor: the file it points to (os.fchmod(fd) must not escape either)
            target = os.readlink(f"/proc/self/fd/{path}")
        except OSError:
            return f"<file descriptor {path}>"
        # A pipe, socket or anonymous inode ("pipe:[123]") is no file on disk: writing to it is
        # not a filesystem write (network use has guards of its own).
        return target if target.startswith("/") else None
    try:
        p = os.fsdecode(os.fspath(path))
    except TypeError:
        return str(path)
    if dir_fd is not None and not os.path.isabs(p):
        try:
            p = os.path.join(os.readlink(f"/proc/self/fd/{int(dir_fd)}"), p)
        except (OSError, ValueError, TypeError):
            return "<path relative to a directory descriptor>"
    return os.path.realpath(p)


def _check_write(report: GuardReport, path: Any, dir_fd: int | None = None, what: str = "write") -> None:
    if report.writes:
        return
    real = _path_text(path, dir_fd)
    if real is None or real == os.devnull:
        return
    for root in report._roots():
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return
    raise report._refuse("write", f"{what} {real}")


def _network(name: str, original: Callable[..., Any], describe: Callable[..., str]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None and not report.network:
            raise report._refuse("network", describe(*args, **kwargs))
        return original(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__wrapped__ = original
    return wrapper


def _address(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)[:120]


def _process(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None and not report.subprocess:
            raise report._refuse("subprocess", name)
        return original(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__wrapped__ = original
    return wrapper


def _path_op(name: str, original: Callable[..., Any], nargs: int = 1) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None:
            dir_fd = kwargs.get("dir_fd", kwargs.get("src_dir_fd"))
            for i, p in enumerate(args[:nargs]):
                _check_write(report, p, kwargs.get("dst_dir_fd") if i == 1 else dir_fd, name)
        return original(*args, **kwargs)

    wrapper.__name__ = name
    wrapper.__wrapped__ = original
    return wrapper


def _open_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None and isinstance(mode, str) and any(c in mode for c in "wax+"):
            _check_write(report, file, None, f"open({mode!r})")
        return original(file, mode, *args, **kwargs)

    guarded_open.__name__ = "open"
    guarded_open.__wrapped__ = original
    return guarded_open


def _os_open_wrapper(original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None and isinstance(flags, int) and flags & _WRITE_FLAGS:
            _check_write(report, path, kwargs.get("dir_fd"), "os.open")
        return original(path, flags, *args, **kwargs)

    guarded_os_open.__name__ = "open"
    guarded_os_open.__wrapped__ = original
    return guarded_os_open


def _popen_init(original: Callable[..., Any]) -> Callable[..., Any]:
    def guarded_init(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        report = _active()
        if report is not None and not report.subprocess:
            raise report._refuse("subprocess", f"subprocess.Popen({str(args)[:80]})")
        return original(self, args, *rest, **kwargs)

    guarded_init.__name__ = "__init__"
    guarded_init.__wrapped__ = original
    return guarded_init


def _targets() -> list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
    """(owner, attribute, wrapper factory) of every patched function that exists here."""
    sock = socket.socket
    out: list[tuple[Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
        (sock, "connect", lambda f: _network("connect", f, lambda s, a, *r, **k: f"connect to {_address(a)}")),
        (sock, "connect_ex", lambda f: _network("connect_ex", f, lambda s, a, *r, **k: f"connect to {_address(a)}")),
        (sock, "bind", lambda f: _network("bind", f, lambda s, a, *r, **k: f"bind to {_address(a)}")),
        (sock, "sendto", lambda f: _network("sendto", f, lambda s, *a, **k: f"send to {_address(a[-1])}")),
        (sock, "sendmsg", lambda f: _network("sendmsg", f, lambda s, *a, **k: "send a message"
                                             + (f" to {_address(a[3])}" if len(a) > 3 else ""))),
        (socket, "create_connection",
         lambda f: _network("create_connection", f, lambda a, *r, **k: f"connect to {_address(a)}")),
        (socket, "getaddrinfo", lambda f: _network("getaddrinfo", f, lambda h, *r, **k: f"look up {str(h)[:80]}")),
        (builtins, "open", _open_wrapper),
        (io, "open", _open_wrapper),
        (os, "open", _os_open_wrapper),
        (subprocess.Popen, "__init__", _popen_init),
    ]
    for name in ("gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        out.append((socket, name, lambda f, n=name: _network(n, f, lambda h, *r, **k: f"look up {str(h)[:80]}")))
    for name in ("remove", "unlink", "rmdir", "mkdir", "truncate", "chmod", "chown", "lchown", "utime", "mkfifo",
                 "mknod", "fchmod", "fchown", "ftruncate", "setxattr", "removexattr", "lsetxattr", "lremovexattr"):
        if hasattr(os, name):
            out.append((os, name, lambda f, n=name: _path_op(f"os.{n}", f)))
    for name in ("rename", "replace", "link", "symlink"):
        if hasattr(os, name):
            out.append((os, name, lambda f, n=name: _path_op(f"os.{n}", f, nargs=2)))
    for name in ("system", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve"):
        if hasattr(os, name):
            out.append((os, name, lambda f, n=name: _process(f"os.{n}", f)))
    return out


class _Patch:
    """One patched function: where it lives, its original, and the wrapper (built once)."""

    __slots__ = ("owner", "attr", "factory", "original", "owned", "wrapper")

    def __init__(self, owner: Any, attr: str, factory: Callable[[Callable[..., Any]], Callable[..., Any]]):
        self.owner, self.attr, self.factory = owner, attr, factory
        self.original: Any = None
        self.owned = False
        self.wrapper: Any = None


_patches: list[_Patch] = []


def _install() -> None:
    global _installed
    with _lock:
        _installed += 1
        if _installed > 1:
            return
        if not _patches:
            _patches.extend(_Patch(owner, attr, factory) for owner, attr, factory in _targets())
        for p in _patches:
            current = getattr(p.owner, p.attr)
            if current is not p.original or p.wrapper is None:  # first use, or replaced since: rewrap
                p.original, p.owned, p.wrapper = current, p.attr in vars(p.owner), p.factory(current)
            setattr(p.owner, p.attr, p.wrapper)


def _uninstall() -> None:
    global _installed
    with _lock:
        _installed -= 1
        if _installed > 0:
            return
        for p in reversed(_patches):
            if getattr(p.owner, p.attr, None) is not p.wrapper:
                continue  # someone patched it after us; leave their patch in place
            if p.owned:
                setattr(p.owner, p.attr, p.original)
            else:
                delattr(p.owner, p.attr)


def is_installed() -> bool:
    """True while at least one guard is active in some thread (for tests)."""
    return _installed > 0
