"""The fork server behind tests/cli_fork.py: imports what `python -m s3gym_tui` imports once, then forks
one child per request, each running the CLI's entry as `python -m s3gym_tui ARGS` would.

    python tests/cli_fork_server.py LISTENING_FD

Started by tests/cli_fork.py as a fresh process (no pytest threads or locks inherited), with the listening
Unix socket (SOCK_SEQPACKET) as LISTENING_FD. The first connection is the control connection: the server
answers it with what it found at import time (below) and exits when it closes, killing the children it
still has. Every later connection is one request: a JSON packet {args, env, cwd, new_session} carrying the
child's stdin, stdout and stderr (SCM_RIGHTS). The server forks (after checking it has exactly one
thread), answers {pid, threads} with a pidfd of the child, and when the child ends answers {status,
rusage, server_cpu} (`os.wait4`) and closes the connection.

Single-threaded on purpose: fork is only safe in a process with one thread. It selects over the listening
socket, the control connection and the pidfds of its children.

The child: closes the server's descriptors, starts a new session if asked, puts the passed descriptors
on 0/1/2, changes directory, REPLACES os.environ (clear + update, so the C environment follows), sets
sys.argv/sys.path[0]/sys.orig_argv as `python -m s3gym_tui` has them, and runs the package's `__main__`
with runpy as `-m` does, at the top level of this script: its exit is the interpreter's own (SystemExit
codes, a traceback and 1 for an uncaught exception, the SIGINT death after an uncaught KeyboardInterrupt,
non-daemon threads joined, atexit handlers run, stdio flushed). Signal dispositions and the signal mask
are this server's, which are those of a fresh interpreter started by the test process (the server does
not change them).

What differs from a fresh interpreter is what was decided before the fork: at interpreter start-up
(PYTHON* variables, HOME for the user site, the locale, TZ, the hash seed: every child shares the
server's) and at import time. The server records, while it imports, every environment variable read
through os.environ/os.getenv, every os.getcwd() and every read of sys.argv; tests/cli_fork.py falls back
to a real interpreter when a request differs from the server in any of them (see its docstring).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import socket
import sys

# sys.path[0] as `python -m s3gym_tui` run from the checkout has it (the checkout, not this script's tests/
# folder): an editable install leaves its package metadata (s3gym.egg-info) there, which the entry points
# read at import see, so a child started from the checkout finds the same metadata the server did
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAX_PACKET = 1 << 20  # a request (its environment) fits in one packet
# The import-time reads of the working directory the child decides again (see redecide), not reported.
REDECIDED_CWD_READS = ("/rich/__init__.py", "/tempfile.py")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


class _ArgvProbe(list):
    """sys.argv while the server imports: notes who reads it."""

    reads: list[str] = []

    def _note(self) -> None:
        frame = sys._getframe(2)
        self.reads.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")

    def __getitem__(self, index):
        self._note()
        return super().__getitem__(index)

    def __iter__(self):
        self._note()
        return super().__iter__()

    def __len__(self):
        self._note()
        return super().__len__()


def preload() -> dict:
    """Import what the CLI imports (and the modules `s3gym run`/`resume` import lazily), noting every
    environment variable, working-directory and sys.argv read made meanwhile."""
    env_reads: dict[str, str | None] = {}
    cwd_reads: list[str] = []
    environ_type = type(os.environ)
    real_getitem, real_getcwd = environ_type.__getitem__, os.getcwd

    def getitem(self, key):
        try:
            value = real_getitem(self, key)
        except KeyError:
            value = None
            raise
        finally:
            if self is os.environ:
                env_reads.setdefault(key, value)
        return value

    def getcwd():
        frame = sys._getframe(1)
        if not frame.f_code.co_filename.endswith(REDECIDED_CWD_READS):
            cwd_reads.append(f"{frame.f_code.co_filename}:{frame.f_lineno}")
        return real_getcwd()

    callbacks = atexit._ncallbacks()
    real_argv = sys.argv
    sys.argv = _ArgvProbe(["-m"])
    environ_type.__getitem__, os.getcwd = getitem, getcwd
    try:
        import s3gym_tui.cli  # noqa: F401  (every command module: what `python -m s3gym_tui` imports)
        import s3gym_tui.config  # noqa: F401
        import s3gym_tui.engine.runner  # noqa: F401
        import s3gym_tui.output  # noqa: F401
        import s3gym_tui.store  # noqa: F401
        import importlib

        import s3gym_games
        from s3gym_tui.engine.llm import _litellm

        for module in s3gym_games._REGISTRY.values():  # the seven games (not the entry points: read fresh)
            importlib.import_module(module)

        _litellm()  # litellm itself, as the first model call imports it
    finally:
        environ_type.__getitem__, os.getcwd = real_getitem, real_getcwd
        argv_reads = list(_ArgvProbe.reads)
        sys.argv = real_argv
    pythonpath = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    tops = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if "." not in name and path:
            tops[name] = os.path.dirname(path) if os.path.basename(path).startswith("__init__.") else path
    return {"env": env_reads, "cwd": real_getcwd(), "cwd_reads": cwd_reads, "argv_reads": argv_reads,
            "atexit_added": atexit._ncallbacks() - callbacks, "threads": _threads(), "modules": tops,
            "heavy": sorted(m for m in ("torch", "transformers", "numpy", "textual") if m in sys.modules),
            "entry_points_read": s3gym_games._installed.cache_info().currsize, "sys_path": list(sys.path),
            "path_rest": sys.path[1 + len(pythonpath):],  # after this script's folder and PYTHONPATH's entries
            "executable": sys.executable, "pid": os.getpid()}


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def serve(listener: socket.socket, hello: dict):
    """Serve until the control connection closes (then exit) or a fork: in the child, return its request."""
    control, _ = listener.accept()
    control.recv(MAX_PACKET)
    hello["cpu"] = _cpu()
    control.send(json.dumps(hello).encode())
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    while True:
        ready, _, _ = select.select([listener, control, *children], [], [])
        if control in ready:  # the test process ended or shut us down
            for pidfd, (pid, _conn) in children.items():
                try:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
            sys.exit(0)
        for pidfd in [fd for fd in ready if isinstance(fd, int)]:
            pid, conn = children.pop(pidfd)
            _, status, usage = os.wait4(pid, 0)
            reply = {"status": status, "rusage": [usage.ru_utime, usage.ru_stime, usage.ru_maxrss],
                     "server_cpu": _cpu()}
            try:
                conn.send(json.dumps(reply).encode())
            except OSError:
                pass  # the test side dropped the process object
            conn.close()
            os.close(pidfd)
        if listener in ready:
            conn, _ = listener.accept()
            try:
                data, fds, _flags, _addr = socket.recv_fds(conn, MAX_PACKET, 3)
            except OSError:
                conn.close()
                continue
            request = json.loads(data)
            threads = _threads()
            if threads != 1 or len(fds) != 3:
                conn.send(json.dumps({"error": f"{threads} threads, {len(fds)} descriptors"}).encode())
                conn.close()
                for fd in fds:
                    os.close(fd)
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            set_up, done = os.pipe()
            pid = os.fork()
            if pid == 0:
                listener.close()
                control.close()
                conn.close()
                os.close(set_up)
                for pidfd, (_pid, other) in children.items():
                    os.close(pidfd)
                    other.close()
                return request, fds, done
            os.close(done)
            for fd in fds:
                os.close(fd)
            os.read(set_up, 1)  # as Popen returns: once the child has its session, descriptors, directory
            os.close(set_up)
            pidfd = os.pidfd_open(pid)
            socket.send_fds(conn, [json.dumps({"pid": pid, "threads": threads}).encode()], [pidfd])
            children[pidfd] = (pid, conn)


def become(request: dict, fds: list[int], done: int) -> None:
    """Turn this forked child into `python -m s3gym_tui ARGS` started with the request's settings."""
    if request.get("new_session"):
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # `python -m`: the working directory, PYTHONPATH's entries, then the rest (tests/cli_fork.py checks that
    # every module the server imported is the one this path finds first)
    sys.path[:] = [os.getcwd(), *request["pythonpath"], *request["path_rest"]]
    import importlib

    importlib.invalidate_caches()
    sys.orig_argv = [sys.executable, "-m", "s3gym_tui", *request["args"]]
    sys.argv = ["-m", *request["args"]]  # runpy puts the __main__.py path first, as `-m` does
    if os.environ.get("PYTHONUNBUFFERED"):
        unbuffered()
    redecide()
    os.write(done, b"1")
    os.close(done)


def unbuffered() -> None:
    """stdout and stderr as PYTHONUNBUFFERED (or -u) makes them at start-up: text layers written
    through to the raw descriptors, no buffer between (the server's were made buffered)."""
    import io

    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        old.flush()
        setattr(sys, name, io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=old.encoding,
                                            errors=old.errors, line_buffering=False, write_through=True))
        setattr(sys, f"__{name}__", getattr(sys, name))


def redecide() -> None:
    """What the imports decided from the server's directory, decided again from the child's as a fresh
    import would: rich's directory for its tracebacks' relative file names, and tempfile's directory
    (found on first use from TMPDIR/TEMP/TMP, /tmp, ..., the working directory last)."""
    import tempfile

    tempfile.tempdir = None
    rich = sys.modules.get("rich")
    if rich is not None:
        rich._IMPORT_CWD = os.path.abspath(os.getcwd())


if __name__ == "__main__":
    _listener = socket.socket(fileno=int(sys.argv[1]))
    _hello = preload()
    import gc

    # What the imports made moves to the permanent generation: the children's collections neither walk
    # it (1.1 s of CPU in every child here, most of a short command's) nor write to its pages (copy on
    # write); what a child makes is collected as usual. (The `gc.freeze()` the docs advise before fork.)
    gc.freeze()
    _request, _fds, _done = serve(_listener, _hello)  # returns only in a forked child
    become(_request, _fds, _done)
    del _listener, _request, _fds, _done, _hello
    import runpy

    runpy.run_module("s3gym_tui", run_name="__main__", alter_sys=True)
