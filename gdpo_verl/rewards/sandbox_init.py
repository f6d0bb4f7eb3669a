"""The code sandbox's in-jail supervisor: one warm interpreter per program that forks a fresh process per test.

Never imported by the project: ``gdpo_verl.rewards.sandbox`` reads this file and runs it inside a bubblewrap jail
as ``python -I -S -c <this source> CONTROL_FD PROGRAM_FD FILTER_FD CONFIG`` (CONFIG: ``marshal`` bytes in hex;
standard library only, the jail's interpreter may be any Python >= 3.9). It starts once per program and then, for
every test the host sends over the control socket (the test's wall limit in seconds as ASCII, with its stdin,
stdout and stderr files passed as fds), runs:

- supervisor (this process; uid 65534 in the jail's user namespace, holding only ``CAP_SYS_ADMIN`` there, in its
  own empty session keyring) forks
- a helper that unshares a new pid, mount and IPC namespace and forks
- the test's init (pid 1 of that pid namespace: it dies with the helper): mounts a fresh size-capped tmpfs on
  the run directory (``disk_mb``, with the program written into it) and a fresh ``/proc``, drops every
  capability, becomes non-dumpable (the test cannot open its fds or memory), forks
- the program (pid 2): its own session, the test's fds as 0-2 and no other, rlimits, the test seccomp filter
  (no mount, namespaces or keyrings) loaded, then the program runs as ``__main__`` and exits as Python would.

The init writes the program's wait status to a pipe and exits; its pid namespace, and with it every process the
test started, dies with it. The supervisor enforces the wall clock (on time-out, and after every test, it
SIGKILLs every other process of the jail and reaps them all) and answers ``"<wait status or -> <timed out: 0|1>"``.
Nothing a test did survives it: files (fresh tmpfs), processes (killed, reaped), SysV/POSIX IPC (fresh IPC
namespace), environment and interpreter state (a fresh fork of a supervisor that never runs
untrusted code), fds (closed). Run it only through ``gdpo_verl.rewards.sandbox``.

Start-up is most of a small program's cost, so this file imports only what it cannot do without (no json, socket,
signal, traceback or runpy: each pulls in enum, re or pkgutil); errors print through ``sys.excepthook``, which is
the interpreter's own traceback printer.
"""

import _socket
import atexit
import builtins
import ctypes
import marshal
import os
import resource
import select
import sys

_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_SECCOMP, _PR_SET_CHILD_SUBREAPER = 1, 4, 22, 36
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, _SECCOMP_MODE_FILTER = 47, 4, 2
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
_KEYCTL_JOIN_SESSION_KEYRING = 1
_CAP_VERSION_3 = 0x20080522
_SIGKILL = 9
_MAX_FDS = 3  # a test's stdin, stdout, stderr


def _print_exc() -> None:
    """The current exception's traceback on stderr, as the interpreter prints an uncaught one."""
    sys.excepthook(*sys.exc_info())


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(ret: int, what: str) -> int:
    if ret < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return ret


def _drop_capabilities(capset_nr: int) -> None:
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2): all empty
    _check(_LIBC.syscall(capset_nr, header, data), "capset")
    _check(_LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")


def _load_filter(bpf: bytes) -> None:
    buffer = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(len(bpf) // 8, ctypes.addressof(buffer))
    _check(_LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def _quit(code=None):
    """``exit()`` / ``quit()``, which ``site`` (not loaded: ``-S``) gives ``python prog.py``."""
    raise SystemExit(code)


def _exit_code(exc: SystemExit) -> int:
    """The status ``python prog.py`` exits with after ``SystemExit``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _program(prog_path: str, fds: list[int], config: dict, test_filter: bytes) -> None:
    """The test's program (pid 2 of its pid namespace); never returns."""
    code = 1
    try:
        os.setsid()
        _LIBC.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 1 << 16)
        os.chdir(config["run_dir"])
        for key, value in config["rlimits"]:
            resource.setrlimit(key, tuple(value))
        _load_filter(test_filter)
        sys.argv = [prog_path]
        main = type(sys)("__main__")  # a fresh __main__, as ``python prog.py`` runs it
        main.__file__, main.__builtins__ = prog_path, builtins
        sys.modules["__main__"] = main
        builtins.exit = builtins.quit = _quit
        try:
            with open(prog_path, "rb") as f:
                source = f.read()
            exec(compile(source, prog_path, "exec"), main.__dict__)  # compiled here: under the test's rlimits
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc)
        except BaseException as exc:  # noqa: BLE001 - the program's uncaught exception: printed, exit 1, like python
            exc.__traceback__ = exc.__traceback__.tb_next  # from the program's frames on, as python prints it
            sys.excepthook(type(exc), exc, exc.__traceback__)
        threading = sys.modules.get("threading")
        if threading is not None:
            threading._shutdown()  # join non-daemon threads, as interpreter exit does
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - a failed final flush exits 120, like python
                code = 120
    finally:
        os._exit(code)


def _init(program: bytes, fds: list[int], status_w: int, config: dict, test_filter: bytes) -> None:
    """The test's init (pid 1 of a fresh pid namespace); never returns."""
    try:
        _check(_LIBC.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0), "pdeathsig")
        run_dir = config["run_dir"].encode()
        _check(_LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
        options = f"size={config['disk_bytes']},nr_inodes={config['nr_inodes']},mode=0700".encode()
        _check(_LIBC.mount(b"tmpfs", run_dir, b"tmpfs", _MS_NOSUID | _MS_NODEV, options), "mount run dir")
        _check(_LIBC.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None), "mount proc")
        for hidden in (b"/proc/keys", b"/proc/key-users"):  # keys of the same uid anywhere: descriptions, counts
            _check(_LIBC.mount(b"/dev/null", hidden, None, _MS_BIND, None), "hide " + hidden.decode())
        prog_path = os.path.join(config["run_dir"], config["prog_name"])
        fd = os.open(prog_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        os.write(fd, program)
        os.close(fd)
        _drop_capabilities(config["capset_nr"])
        _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        pid = os.fork()
        if pid == 0:
            os.close(status_w)
            _program(prog_path, fds, config, test_filter)
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        os.write(status_w, str(status).encode())
    except BaseException:  # noqa: BLE001 - a jail failure: to the supervisor's stderr (the host reports it)
        _print_exc()
    finally:
        os._exit(0)


def _run_test(program: bytes, fds: list[int], wall_s: float, config: dict, test_filter: bytes) -> dict:
    status_r, status_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        try:
            os.close(status_r)
            os.close(config["control_fd"])
            _check(_LIBC.unshare(_CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC), "unshare")
            init = os.fork()
            if init == 0:
                _init(program, fds, status_w, config, test_filter)
            os.waitpid(init, 0)
        except BaseException:  # noqa: BLE001 - a jail failure: to the supervisor's stderr (the host reports it)
            _print_exc()
        finally:
            os._exit(0)
    os.close(status_w)
    pidfd = os.pidfd_open(helper)
    timed_out = not select.select([pidfd], [], [], max(0.0, wall_s))[0]
    os.close(pidfd)
    _kill_and_reap()
    data = os.read(status_r, 32)
    os.close(status_r)
    return b"%s %d" % (data or b"-", timed_out)


def _kill_and_reap() -> None:
    """SIGKILL every process of the jail but its init and this one, and reap them all (this is a subreaper)."""
    while True:
        try:
            os.kill(-1, _SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _recv_fds(control) -> tuple[bytes, list[int]]:
    """One message and the fds passed with it (``socket.recv_fds`` without importing ``socket``)."""
    message, ancillary, _, _ = control.recvmsg(4096, _socket.CMSG_LEN(_MAX_FDS * 4))
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += memoryview(data)[: len(data) - len(data) % 4].cast("i").tolist()
    return message, fds


def main() -> None:
    control_fd, prog_fd, filter_fd = (int(arg) for arg in sys.argv[1:4])
    config = marshal.loads(bytes.fromhex(sys.argv[4]))  # written by the host (sandbox._init_config)
    config["control_fd"] = control_fd
    # A new, empty session keyring: nothing of the host's keyrings is reachable from here on.
    _check(_LIBC.syscall(config["keyctl_nr"], _KEYCTL_JOIN_SESSION_KEYRING, None, 0, 0, 0), "keyctl join")
    _check(_LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    _LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    with open(prog_fd, "rb") as f:
        program = f.read()
    with open(filter_fd, "rb") as f:
        test_filter = f.read()
    control = _socket.socket(fileno=control_fd)
    while True:
        message, fds = _recv_fds(control)
        if not message:
            return
        reply = _run_test(program, fds, float(message), config, test_filter)
        for fd in fds:
            os.close(fd)
        control.sendall(reply)


if __name__ == "__main__":
    main()
