"""`s3gym` CLI processes for the tests without paying `import litellm` each time: forked from a server
that imported the CLI once.

    from tests.cli_fork import spawn
    proc = spawn(["resume", run_id, "--db", str(db)], env=ENV, cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True)

`spawn(args, ...)` is `subprocess.Popen([sys.executable, "-m", "s3gym_tui", *args], ...)` for what the tests
use (env, cwd, stdin/stdout/stderr = None|DEVNULL|PIPE|STDOUT|a file or descriptor, text/encoding/errors,
start_new_session): the object it returns has pid, args, returncode, stdin/stdout/stderr, poll(),
wait(timeout), communicate(input, timeout), send_signal(), terminate(), kill(), and raises
subprocess.TimeoutExpired as Popen does. `run(args, ...)` is subprocess.run for it (capture_output, input,
timeout, check). Each process is a real process, the CLI's real entry (`s3gym_tui/__main__.py`, run as
`-m` runs it) with its own descriptors, environment, directory and session: what its tests look at (exit
codes, output, signals, kill -9, the store) is what a fresh interpreter does. Why one would differ, and
when it falls back to a fresh interpreter:

* A process forked from a preloaded server differs from a fresh interpreter only in what was decided
  before the fork. The server (tests/cli_fork_server.py, started once per test process, lazily, as a fresh
  `python` of its own: no pytest threads or locks inherited) records while it imports every environment
  variable read through os.environ/os.getenv (litellm reads ~390 at import: LITELLM_LOG,
  LITELLM_LOCAL_MODEL_COST_MAP, its constants; rich reads FORCE_COLOR, NO_COLOR, TTY_*; s3gym_tui's
  providers/local.py reads OMP_NUM_THREADS and LOCAL_WORLD_SIZE; tempfile caches TMPDIR), every
  os.getcwd() and every read of sys.argv. Interpreter start-up adds PYTHON*, HOME (the user site), the
  locale (LANG, LC_*) and TZ, and C libraries SSL_CERT_FILE/SSL_CERT_DIR (PYTHONUNBUFFERED set in a
  request, not in the server's environment, is done in the child: its stdout and stderr are made
  unbuffered as start-up makes them). `spawn` starts a real
  `python -m s3gym_tui` (subprocess.Popen, returned as is) when the request's environment differs from the
  server's in any of those (set or unset, or another value), when its directory differs and import-time
  code read the directory, when the sys.path of `python -m` with that directory and PYTHONPATH (the
  directory, PYTHONPATH's entries, the interpreter's own) would find another file first for a module the
  server imported, or holds package metadata (entry points, read at import) the server's did not, when one
  of its std descriptors is a
  terminal (the consoles and stdio buffering were set up for non-terminals), or when S3GYM_TEST_NO_FORK
  is set (in the test process: everything runs fresh, for comparing). `fallback_reason(...)` says why.
* Every child shares the server's hash seed (PYTHONHASHSEED is decided at start-up), its process group
  when no new session is asked (the server's own session, not the test process's: a terminal's Ctrl-C
  reaches the test process only), an uncaught exception's traceback shows this server's frames instead
  of runpy's, every child has imported what the server imported (litellm too, with its four atexit
  handlers, for a command that would not import it), and what those imports made is frozen (gc.freeze():
  the children's collections skip it, as they skip nothing a fresh process made since; a garbage cycle
  among those import-time objects is never freed, memory only).

CPU: the children are the server's, so the test process's RUSAGE_CHILDREN does not see them. Each reaped
child's rusage (wait4: its own and its descendants'), the server's start-up (counted by the test that
starts it) and the server's own CPU since are added to `cpu_seconds()`, which tests/conftest.py's
S3GYM_TEST_CPU_LOG hook adds to the children's CPU of each test.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
SERVER = Path(__file__).resolve().with_name("cli_fork_server.py")
PIPE, STDOUT, DEVNULL = subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL
# decided when the interpreter starts (besides PYTHON*): the user site, the locale, the time zone, OpenSSL
STARTUP_ENV = ("HOME", "LANG", "LANGUAGE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
STARTUP_PREFIXES = ("PYTHON", "LC_")

_cpu = 0.0  # the CPU seconds of the reaped children and of the server (see cpu_seconds)
_lock = threading.RLock()
_server: Optional["ForkServer"] = None


def cpu_seconds() -> float:
    """CPU seconds of the forked children reaped so far (with their descendants) and of the server."""
    return _cpu


def _add_cpu(seconds: float) -> None:
    global _cpu
    with _lock:
        _cpu += seconds


class ForkServer:
    """A fork server process (tests/cli_fork_server.py) started with `env` (default: os.environ)."""

    def __init__(self, env: Optional[dict] = None) -> None:
        self.folder = tempfile.mkdtemp(prefix="s3gym-fork-")
        self.path = os.path.join(self.folder, "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.path)
        listener.listen(64)
        self.log = open(os.path.join(self.folder, "server.log"), "wb")
        env = dict(os.environ if env is None else env)
        self.process = subprocess.Popen([sys.executable, str(SERVER), str(listener.fileno())],
                                        pass_fds=(listener.fileno(),), stdin=DEVNULL, stdout=DEVNULL,
                                        stderr=self.log, cwd=str(ROOT), env=env, start_new_session=True)
        listener.close()
        self.env = env
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control.connect(self.path)
        self.control.send(b"hello")
        ready, _, _ = select.select([self.control], [], [], 300)
        data = self.control.recv(1 << 20) if ready else b""
        if not data:
            raise RuntimeError(f"the fork server did not start: {self.log_tail()}")
        self.hello = json.loads(data)
        self.cpu_seen = self.hello["cpu"]
        self.counted = 0.0  # what cpu_seconds() holds of this server and its children
        self.count(self.cpu_seen)  # its start-up: counted by the test that starts it
        self.import_env = {k for k in self.hello["env"]} | {k for k in env if k.startswith(STARTUP_PREFIXES)}
        self.import_env |= set(STARTUP_ENV)

    def log_tail(self) -> str:
        try:
            return Path(self.log.name).read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def server_cpu(self, total: float) -> None:
        with _lock:
            delta, self.cpu_seen = max(0.0, total - self.cpu_seen), max(total, self.cpu_seen)
        self.count(delta)

    def count(self, seconds: float) -> None:
        with _lock:
            self.counted += seconds
        _add_cpu(seconds)

    def close(self) -> None:
        """Stop the server. Waiting for it adds its CPU and its children's to RUSAGE_CHILDREN, which
        cpu_seconds() has counted already: taken off it again (what is left is the server's CPU since)."""
        import resource

        def children() -> float:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            return usage.ru_utime + usage.ru_stime

        before = children()
        self.control.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        _add_cpu(-min(children() - before, self.counted))
        self.log.close()
        for name in ("socket", "server.log"):
            try:
                os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass
        try:
            os.rmdir(self.folder)
        except OSError:
            pass


def server() -> ForkServer:
    """This process's fork server, started on first use and shut down when the process exits."""
    global _server
    with _lock:
        if _server is None or _server.process.poll() is not None:
            _server = ForkServer()
            atexit.register(_server.close)
        return _server


def _is_tty(target) -> bool:
    fd = target if isinstance(target, int) and target >= 0 else None
    if fd is None and target not in (None, PIPE, DEVNULL, STDOUT):
        fd = target.fileno()
    if target is None:
        return False  # checked as the test process's own descriptors by the caller
    return fd is not None and os.isatty(fd)


def fallback_reason(env: dict, cwd: str, streams=(None, None, None), fork_server: Optional[ForkServer] = None
                    ) -> Optional[str]:
    """Why a request with this environment, directory and std streams needs a fresh interpreter (None:
    it can be forked)."""
    if os.environ.get("S3GYM_TEST_NO_FORK"):
        return "S3GYM_TEST_NO_FORK is set"
    for number, target in enumerate(streams):
        if target is None and os.isatty(number) or _is_tty(target):
            return f"descriptor {number} is a terminal"
    srv = fork_server or server()
    for key in sorted(srv.import_env | {k for k in env if k.startswith(STARTUP_PREFIXES)}):
        if key == "PYTHONUNBUFFERED" and env.get(key) and not srv.env.get(key):
            continue  # the child makes its stdout and stderr unbuffered (cli_fork_server.unbuffered)
        if key != "PYTHONPATH" and env.get(key) != srv.env.get(key):  # PYTHONPATH: checked as sys.path
            return f"{key} differs from the server's (read at start-up or import)"
    real_cwd = os.path.realpath(cwd)
    if srv.hello["cwd_reads"] and real_cwd != os.path.realpath(srv.hello["cwd"]):
        return "the directory differs and import-time code read it: " + srv.hello["cwd_reads"][0]
    path = fresh_path(env, real_cwd, srv)
    if isinstance(path, str):
        return path
    return _shadowed(path, srv)


def fresh_path(env: dict, cwd: str, srv: ForkServer):
    """The sys.path of `python -m s3gym_tui` with this environment and directory (a str: why it is not
    known): the directory, PYTHONPATH's entries, then the interpreter's own (the server's after its
    PYTHONPATH)."""
    entries = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep)] if env.get("PYTHONPATH") else []
    if any(not entry or not os.path.isabs(entry) for entry in entries):
        return "PYTHONPATH has an empty or relative entry"
    return [cwd, *entries, *srv.hello["path_rest"]]


def _first_found(name: str, path: list[str]) -> Optional[str]:
    for entry in path:
        package = os.path.join(entry, name)
        if os.path.isfile(os.path.join(package, "__init__.py")):
            return package
        if os.path.isfile(package + ".py"):
            return package + ".py"
    return None


def _shadowed(path: list[str], srv: ForkServer) -> Optional[str]:
    """Why a module the server imported would not be the one `path` finds first (None: each is), or why
    the entry points (read at import) could differ."""
    known = {os.path.realpath(entry) for entry in srv.hello["sys_path"]}
    for entry in path:
        if os.path.realpath(entry) not in known and os.path.isdir(entry):
            if any(name.endswith((".dist-info", ".egg-info")) for name in os.listdir(entry)):
                return f"{entry} holds package metadata (entry points) the server did not see"
    for name, location in srv.hello["modules"].items():
        found = _first_found(name, path)
        if found is not None and os.path.realpath(found) != os.path.realpath(location):
            return f"{found} would be imported instead of the server's {name}"
    return None


class ForkedProcess:
    """A forked `python -m s3gym_tui ARGS`, with subprocess.Popen's interface for what the tests use."""

    def __init__(self, args: list[str], *, env: dict, cwd: str, stdin=None, stdout=None, stderr=None,
                 text: bool = False, encoding: Optional[str] = None, errors: Optional[str] = None,
                 start_new_session: bool = False, fork_server: Optional[ForkServer] = None) -> None:
        self.args = [sys.executable, "-m", "s3gym_tui", *args]
        self.returncode: Optional[int] = None
        self.stdin = self.stdout = self.stderr = None
        self._server = fork_server or server()
        self._output: dict[str, list[bytes]] = {}
        self._input_offset = 0
        self._input: Optional[bytes] = None
        text_mode = bool(text or encoding or errors)
        ours, theirs = [], []  # descriptors to close here after sending, the ones sent
        devnull = None

        def child_end(target, number: int) -> int:
            nonlocal devnull
            if target is None:
                return number
            if target == DEVNULL:
                if devnull is None:
                    devnull = os.open(os.devnull, os.O_RDWR)
                    ours.append(devnull)
                return devnull
            if target == PIPE:
                read, write = os.pipe()
                mine, child = (write, read) if number == 0 else (read, write)
                ours.append(child)
                stream = io.open(mine, "wb" if number == 0 else "rb")
                if text_mode:
                    stream = io.TextIOWrapper(stream, encoding=encoding, errors=errors, write_through=number == 0)
                setattr(self, ("stdin", "stdout", "stderr")[number], stream)
                return child
            if target == STDOUT:
                return theirs[1]
            return target if isinstance(target, int) else target.fileno()

        try:
            for number, target in enumerate((stdin, stdout, stderr)):
                theirs.append(child_end(target, number))
            self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._conn.connect(self._server.path)
            path = fresh_path(env, os.path.realpath(cwd), self._server)
            request = {"args": [str(a) for a in args], "env": env, "cwd": str(cwd),
                       "new_session": bool(start_new_session), "pythonpath": path[1:len(path) - len(self._server.hello["path_rest"])],
                       "path_rest": self._server.hello["path_rest"]}
            socket.send_fds(self._conn, [json.dumps(request).encode()], theirs)
            data, fds, _flags, _addr = socket.recv_fds(self._conn, 1 << 16, 1)
            reply = json.loads(data) if data else {"error": "the fork server closed the connection: "
                                                           + self._server.log_tail()}
            if "error" in reply:
                raise RuntimeError(f"fork server: {reply['error']}")
            self.pid: int = reply["pid"]
            self.threads_at_fork: int = reply["threads"]
            self._pidfd = fds[0]
        except BaseException:
            for stream in (self.stdin, self.stdout, self.stderr):
                if stream is not None:
                    stream.close()
            raise
        finally:
            for fd in ours:
                os.close(fd)

    # -- exit status -------------------------------------------------------------------------------------
    def _reap(self, timeout: Optional[float]) -> bool:
        if self.returncode is not None:
            return True
        ready, _, _ = select.select([self._conn], [], [], timeout)
        if not ready:
            return False
        data = self._conn.recv(1 << 16)
        self._conn.close()
        os.close(self._pidfd)
        if not data:
            raise RuntimeError("the fork server went away: " + self._server.log_tail())
        reply = json.loads(data)
        utime, stime, _maxrss = reply["rusage"]
        self._server.count(utime + stime)
        self._server.server_cpu(reply["server_cpu"])
        self.returncode = os.waitstatus_to_exitcode(reply["status"])
        return True

    def poll(self) -> Optional[int]:
        self._reap(0)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if not self._reap(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    # -- signals -----------------------------------------------------------------------------------------
    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # the pidfd names this process even if its pid were reused
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass  # it ended (the server reaps it)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    # -- output ------------------------------------------------------------------------------------------
    def communicate(self, input=None, timeout: Optional[float] = None):
        """Popen.communicate: write `input`, read stdout/stderr to their end, wait; on a timeout raise
        TimeoutExpired and keep what was read for the next call."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._input is None and input is not None and self.stdin is not None:
            text = isinstance(self.stdin, io.TextIOWrapper)
            self._input = input.encode(self.stdin.encoding, self.stdin.errors) if text else input
        readers = {}
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is not None and not stream.closed:
                raw = stream.buffer if isinstance(stream, io.TextIOWrapper) else stream
                readers[raw.fileno()] = (name, raw)
                self._output.setdefault(name, [])
        writer = None
        if self.stdin is not None and not self.stdin.closed:
            self.stdin.flush()
            if self._input and self._input_offset < len(self._input):
                writer = self.stdin.fileno()
            else:
                self.stdin.close()
        while readers or writer is not None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout, *self._partial())
            readable, writable, _ = select.select(list(readers), [writer] if writer is not None else [], [], left)
            if writer is not None and writable:
                try:
                    self._input_offset += os.write(writer, self._input[self._input_offset:self._input_offset + 65536])
                except BrokenPipeError:
                    self._input_offset = len(self._input)
                if self._input_offset >= len(self._input):
                    self.stdin.close()
                    writer = None
            for fd in readable:
                name, raw = readers[fd]
                chunk = os.read(fd, 65536)
                if chunk:
                    self._output[name].append(chunk)
                else:
                    del readers[fd]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            self.wait(left)
        except subprocess.TimeoutExpired:
            raise subprocess.TimeoutExpired(self.args, timeout, *self._partial()) from None
        outputs = []
        for name in ("stdout", "stderr"):
            stream = getattr(self, name)
            if stream is None:
                outputs.append(None)
                continue
            data = b"".join(self._output.get(name, []))
            if isinstance(stream, io.TextIOWrapper):
                data = _decode(data, stream.encoding, stream.errors)
            stream.close()
            outputs.append(data)
        return tuple(outputs)

    def _partial(self):
        return (b"".join(self._output.get("stdout", [])) or None, b"".join(self._output.get("stderr", [])) or None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for stream in (self.stdout, self.stderr, self.stdin):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self.wait()

    def __repr__(self) -> str:
        return f"<ForkedProcess pid={self.pid} returncode={self.returncode} args={self.args[3:]!r}>"


def _decode(data: bytes, encoding: str, errors: str) -> str:
    """As Popen's text mode: decoded, universal newlines."""
    return data.decode(encoding, errors).replace("\r\n", "\n").replace("\r", "\n")


def spawn(args, *, env: Optional[dict] = None, cwd=None, stdin=None, stdout=None, stderr=None,
          text: bool = False, universal_newlines: bool = False, encoding: Optional[str] = None,
          errors: Optional[str] = None, start_new_session: bool = False, fork_server: Optional[ForkServer] = None):
    """`subprocess.Popen([sys.executable, "-m", "s3gym_tui", *args], ...)`, forked from the preloaded
    server (a ForkedProcess) or, when the request differs from the server in what matters at start-up or
    import time, a real subprocess.Popen (see the module's docstring)."""
    env = dict(os.environ if env is None else env)
    cwd = str(cwd if cwd is not None else os.getcwd())
    text = text or universal_newlines
    if not os.path.isdir(cwd):
        raise FileNotFoundError(2, "No such file or directory", cwd)  # as Popen raises it
    reason = fallback_reason(env, cwd, (stdin, stdout, stderr), fork_server)
    if reason is not None:
        spawn.last_fallback = reason
        return subprocess.Popen([sys.executable, "-m", "s3gym_tui", *map(str, args)], env=env, cwd=cwd,
                                stdin=stdin, stdout=stdout, stderr=stderr, text=text, encoding=encoding,
                                errors=errors, start_new_session=start_new_session)
    spawn.last_fallback = None
    return ForkedProcess(list(args), env=env, cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, text=text,
                         encoding=encoding, errors=errors, start_new_session=start_new_session,
                         fork_server=fork_server)


spawn.last_fallback = None  # why the last spawn started a fresh interpreter (None: it forked)


def run(args, *, input=None, capture_output: bool = False, timeout: Optional[float] = None,
        check: bool = False, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run for `spawn`."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = PIPE
    if input is not None:
        kwargs["stdin"] = PIPE
    proc = spawn(args, **kwargs)
    with proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if check:
        result.check_returncode()
    return result
