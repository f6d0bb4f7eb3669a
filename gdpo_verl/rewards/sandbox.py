"""Sandbox for untrusted Python: the code-reasoning task runs generated programs ONLY through this module.

Two backends, one result type (``SandboxResult``):

- local (default): ``run_tests(code, stdins)`` starts one launcher (this file) in a fresh private directory;
  the launcher confines itself, then runs the program once per stdin, each run a new process with its own
  limits. Layers, each probed once per process and used when it works:
  1. resource limits per run, always: RLIMIT_CPU (SIGXCPU, then SIGKILL one second later), RLIMIT_AS
     (memory), RLIMIT_NPROC (process count), RLIMIT_FSIZE (file size, stdout included), RLIMIT_NOFILE, no
     core dumps;
  2. wall-clock time-outs, always: per run (the launcher kills the run's process group) and for the whole
     batch (the parent kills the launcher's);
  3. a private temporary directory as cwd and HOME, a minimal environment and ``python -I``, always;
  4. namespaces via ``unshare``: a network namespace (no interface is up: every connect fails, loopback
     included) and a pid namespace (every process of the program dies with it);
  5. an unprivileged identity: as root, a fresh random uid/gid per run (RLIMIT_NPROC never binds uid 0);
     otherwise a user namespace whose capabilities the launcher drops;
  6. Landlock (Linux >= 5.13): writes only inside the private directory, reads only system and Python
     directories (no $HOME, no /tmp), TCP connect/bind denied (ABI >= 4), no signals or abstract sockets
     outside the sandbox (ABI >= 6).
  A layer that is not available is a fallback: counted in ``STATS`` (``fallback_*`` keys) and logged once.
  Without layers 4-6 (e.g. a container without CAP_SYS_ADMIN and without Landlock) only 1-3 remain; then
  prefer the sandbox-fusion backend. ``plan()`` tells which layers this process uses.
- sandbox-fusion: ``sandbox_fusion_url=...`` posts the program to a SandboxFusion ``/run_code`` service
  (the service verl's own code rewards use); service failures raise ``SandboxError``.

Run ``python -m gdpo_verl.rewards.sandbox`` to print the plan and run a smoke program, or
``python -m gdpo_verl.rewards.sandbox 'print(6 * 7)'`` to run one. The module uses the standard library only: the
same file is the launcher that runs inside the namespaces (``python -I -S sandbox.py --launch SPEC_FD REPORT_FD``).
"""

from __future__ import annotations

import collections
import ctypes
import json
import logging
import os
import random
import resource
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

log = logging.getLogger(__name__)

STATS: collections.Counter[str] = collections.Counter()  # runs and fallbacks of this process
_LAUNCH_FLAG = "--launch"
_PROG_NAME = "prog.py"
_MIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
_SYSTEM_READ_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/nix", "/dev")
_NOBODY = 65534


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the program): bad setup or an unreachable sandbox-fusion service."""


@dataclass(frozen=True)
class Limits:
    """Per-run limits. ``nproc`` counts every process of the sandbox's identity, the launcher included."""

    cpu_s: int = 5
    wall_s: float = 10.0
    memory_mb: int = 1024
    nproc: int = 32
    fsize_mb: int = 16
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
class Plan:
    """The isolation layers this process uses, found by probing once (see ``plan()``)."""

    unshare_argv: tuple[str, ...]
    netns: bool
    pidns: bool
    drop_uid: bool
    drop_caps: bool
    landlock_abi: int
    python: str
    read_paths: tuple[str, ...]

    @property
    def layers(self) -> tuple[str, ...]:
        names = ["rlimits", "wall-timeout", "private-dir"]
        names += ["netns"] if self.netns else []
        names += ["pidns"] if self.pidns else []
        names += ["uid-drop"] if self.drop_uid else []
        names += ["userns-nocaps"] if self.drop_caps else []
        names += ["landlock-fs"] if self.landlock_abi >= 1 else []
        names += ["landlock-net"] if self.landlock_abi >= 4 else []
        names += ["landlock-scope"] if self.landlock_abi >= 6 else []
        return tuple(names)


# ----------------------------------------------------------------------------------------------------------
# Landlock and capabilities through raw syscalls (ctypes): used by the launcher and by the probe.

_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446  # same numbers on every architecture
_LL_VERSION_FLAG = 1
_LL_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 38, 24


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel, 0 when Landlock is absent, disabled or filtered."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_LL_VERSION_FLAG))
    return max(0, int(version))


def _landlock_restrict(abi: int, workdir: str, read_paths: list[str]) -> None:
    """Irrevocably confine this process and its children: see the module docstring, layer 6."""
    libc = _libc()
    fs_all = (1 << 13) - 1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs=fs_all)
    size = 8
    if abi >= 4:
        attr.net, size = _NET_BIND_TCP | _NET_CONNECT_TCP, 16
    if abi >= 6:
        attr.scoped, size = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL, 24
    ruleset = libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    read_only = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    file_rw = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    rules = [(path, read_only) for path in read_paths] + [("/dev/null", file_rw), (workdir, fs_all)]
    try:
        for path, allowed in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # absent or not reachable: nothing to allow there
            try:
                rule = _PathBeneath(allowed=allowed, parent_fd=fd)
                if libc.syscall(_LL_ADD_RULE, ruleset, _LL_RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
        if libc.syscall(_LL_RESTRICT, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _drop_capabilities() -> None:
    """Drop every capability (bounding set too), for the root of a user namespace."""
    libc = _libc()
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"PR_CAPBSET_DROP {cap}")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable for both 32-bit halves: all zero
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _drop_to_unprivileged(uid: int, paths: list[str]) -> int:
    """As root: give ``paths`` to ``uid`` and become it; fall back to nobody where ``uid`` is unmapped."""
    for candidate in (uid, _NOBODY):
        try:
            for path in paths:
                os.chown(path, candidate, candidate)
            os.setgroups([])
            os.setresgid(candidate, candidate, candidate)
            os.setresuid(candidate, candidate, candidate)
            return candidate
        except OSError:
            continue
    raise OSError("no unprivileged uid could be set")


# ----------------------------------------------------------------------------------------------------------
# The launcher: runs inside the namespaces, confines itself, then runs each test as a forked, limited child.


def _set_rlimits(limits: dict) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    fsize = int(limits["fsize_mb"]) * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(limits["nofile"]), int(limits["nofile"])))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (int(limits["nproc"]), int(limits["nproc"])))


def _anonymous_file(workdir: str) -> int:
    """A read-write file with no name (created, then unlinked), so programs cannot find it by path."""
    path = os.path.join(workdir, ".io-" + os.urandom(8).hex())
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    os.unlink(path)
    return fd


def _wait(pid: int, timeout: float) -> tuple[int, float, bool]:
    """Wait for ``pid`` at most ``timeout`` seconds, killing its process group after; (status, cpu_s, timed_out)."""
    deadline = time.monotonic() + timeout
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    timed_out = True
    if pidfd is not None:
        timed_out = not select.select([pidfd], [], [], timeout)[0]
        os.close(pidfd)
    else:
        while time.monotonic() < deadline:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                timed_out = False
                break
            time.sleep(0.005)
    _kill_group(pid)  # the test's whole process group, before reaping (so the group id is still its own)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime, timed_out


def _run_test(spec: dict, stdin: str) -> dict:
    limits, workdir = spec["limits"], spec["workdir"]
    fds = [_anonymous_file(workdir) for _ in range(3)]
    os.write(fds[0], stdin.encode("utf-8", errors="replace"))
    os.lseek(fds[0], 0, os.SEEK_SET)
    env = dict(_MIN_ENV, HOME=workdir, TMPDIR=workdir)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            _set_rlimits(limits)
            os.execve(spec["python"], [spec["python"], "-I", _PROG_NAME], env)
        finally:
            os._exit(127)
    try:
        os.setpgid(pid, pid)  # also from this side, so the group exists whichever process runs first
    except OSError:
        pass
    status, cpu_s, timed_out = _wait(pid, float(limits["wall_s"]))
    cap = int(limits["max_output_bytes"])
    out = [os.pread(fd, cap, 0).decode("utf-8", errors="replace") for fd in fds[1:]]
    for fd in fds:
        os.close(fd)
    exit_code = os.waitstatus_to_exitcode(status)
    wall_s = time.monotonic() - start
    return {"exit": exit_code, "cpu_s": cpu_s, "wall_s": wall_s, "timed_out": timed_out, "out": out}


def _launch(spec_fd: int, report_fd: int) -> int:
    with os.fdopen(spec_fd, "rb") as f:
        spec = json.loads(f.read())
    os.set_inheritable(report_fd, False)
    workdir = spec["workdir"]
    try:
        os.chdir(workdir)
        os.umask(0o077)
        if spec["uid"] is not None:
            _drop_to_unprivileged(spec["uid"], [workdir, os.path.join(workdir, _PROG_NAME)])
        if spec["drop_caps"]:
            _drop_capabilities()
        if spec["landlock_abi"] >= 1:
            _landlock_restrict(spec["landlock_abi"], workdir, spec["read_paths"])
    except Exception as exc:  # noqa: BLE001 - any setup failure is reported to the parent as such
        os.write(report_fd, json.dumps({"setup_error": repr(exc)}).encode())
        return 126
    results = [_run_test(spec, stdin) for stdin in spec["stdins"]]
    os.write(report_fd, json.dumps({"results": results}).encode())
    return 0


# ----------------------------------------------------------------------------------------------------------
# The parent side: probing the plan once, running programs.

_PLAN_LOCK = threading.Lock()
_PLAN: Plan | None = None


def _fallback(kind: str, why: str) -> None:
    STATS[f"fallback_{kind}"] += 1
    if STATS[f"fallback_{kind}"] == 1:
        log.warning("sandbox fallback %s: %s", kind, why)


def _python_read_paths() -> tuple[str, ...]:
    """System directories plus this interpreter's prefixes and library directories (stdlib, site-packages)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(path for path in sysconfig.get_paths().values() if os.path.isdir(path))
    return tuple(sorted(set(_SYSTEM_READ_DIRS) | paths))


def _probe_unshare() -> tuple[tuple[str, ...], bool, bool]:
    binary = shutil.which("unshare")
    if binary is None or not sys.platform.startswith("linux"):
        return (), False, False
    user = () if os.geteuid() == 0 else ("--user", "--map-root-user")
    for flags, pidns in ((("--net", "--pid", "--fork", "--kill-child"), True), (("--net",), False)):
        argv = (binary, *user, *flags)
        try:
            done = subprocess.run([*argv, "true"], capture_output=True, timeout=10, env=_MIN_ENV)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return argv, True, pidns
    return (), False, False


def plan() -> Plan:
    """Probe the isolation layers once per process (thread-safe) and return what every run will use."""
    global _PLAN
    with _PLAN_LOCK:
        if _PLAN is None:
            _PLAN = _make_plan()
        return _PLAN


def _make_plan() -> Plan:
    """Try the strongest configuration first, dropping Landlock, then namespaces, until a probe runs."""
    unshare_argv, netns, pidns = _probe_unshare()
    abi = landlock_abi()
    root = os.geteuid() == 0
    configs = [(unshare_argv, abi), (unshare_argv, 0), ((), abi), ((), 0)]
    pythons = [os.environ.get("GDPO_SANDBOX_PYTHON"), sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]
    errors = []
    for argv, ll_abi in dict.fromkeys(configs):
        for python in dict.fromkeys(c for c in pythons if c and os.path.exists(c)):
            candidate = Plan(
                unshare_argv=argv,
                netns=netns and bool(argv),
                pidns=pidns and bool(argv),
                drop_uid=root,
                drop_caps=bool(argv) and not root,
                landlock_abi=ll_abi,
                python=python,
                read_paths=_python_read_paths(),
            )
            try:
                (probe,) = _run_local(candidate, "print('ok')", [""], Limits(wall_s=20.0))
            except SandboxError as exc:
                errors.append(f"{python} {candidate.layers}: {exc}")
                continue
            if probe.ok and probe.stdout.strip() == "ok":
                return candidate
            errors.append(f"{python} {candidate.layers}: {probe.status} {probe.stderr[-300:]!r}")
    raise SandboxError("no configuration runs a program inside the sandbox: " + "; ".join(errors))


def _count_fallbacks(p: Plan) -> None:
    if not p.netns:
        _fallback("no_netns", "unshare --net unavailable: the network is reachable unless Landlock-net blocks TCP")
    if not p.pidns:
        _fallback("no_pidns", "no pid namespace: processes that leave their process group may outlive the run")
    if not p.drop_uid and not p.drop_caps:
        _fallback("no_identity_drop", "neither a fresh uid nor a user namespace: RLIMIT_NPROC counts the user")
    if p.landlock_abi < 1:
        _fallback("no_landlock", "Landlock unavailable: writes outside the private directory are not blocked")
    elif p.landlock_abi < 4:
        _fallback("no_landlock_net", "Landlock ABI < 4: TCP is not blocked by Landlock")


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
    """Run ``code`` once per stdin, each run a fresh process under ``limits`` (one sandbox for all of them).

    ``budget_s`` bounds the whole batch (default: every run's wall limit plus start-up); runs it leaves no
    time for are reported as time-outs. Raises ``SandboxError`` only when the sandbox itself fails (setup, or
    the sandbox-fusion service), never for anything the program does.
    """
    limits = limits or Limits()
    STATS["runs"] += len(stdins)
    if not stdins:
        return []
    if sandbox_fusion_url:
        import concurrent.futures  # imported here, like urllib: the launcher never needs it

        with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(stdins))) as pool:
            return list(pool.map(lambda stdin: _run_fusion(sandbox_fusion_url, code, stdin, limits), stdins))
    p = plan()
    _count_fallbacks(p)
    budget = budget_s if budget_s is not None else 10.0 + len(stdins) * (limits.wall_s + 1.0)
    return _run_local(p, code, stdins, limits, budget)


def _run_local(p: Plan, code: str, stdins: list[str], limits: Limits, budget_s: float = 60.0) -> list[SandboxResult]:
    with (
        tempfile.TemporaryDirectory(prefix="gdpo-sbx-") as workdir,
        tempfile.TemporaryFile() as spec_file,
        tempfile.TemporaryFile() as report_file,
        tempfile.TemporaryFile() as log_file,
    ):
        with open(os.path.join(workdir, _PROG_NAME), "w", encoding="utf-8", errors="replace") as f:
            f.write(code)
        spec = {
            "workdir": workdir,
            "python": p.python,
            "uid": random.SystemRandom().randrange(100_000, 2**31 - 2) if p.drop_uid else None,
            "drop_caps": p.drop_caps,
            "landlock_abi": p.landlock_abi,
            "read_paths": list(p.read_paths),
            "limits": asdict(limits),
            "stdins": stdins,
        }
        spec_file.write(json.dumps(spec).encode())
        spec_file.seek(0)
        fds = (spec_file.fileno(), report_file.fileno())
        launcher = [sys.executable, "-I", "-S", os.path.abspath(__file__), _LAUNCH_FLAG, *map(str, fds)]
        proc = subprocess.Popen(
            [*p.unshare_argv, *launcher],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            pass_fds=fds,
            start_new_session=True,
            cwd=workdir,
            env=_MIN_ENV,
        )
        timed_out = False
        try:
            proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(proc.pid)
        proc.wait()
        report_file.seek(0)
        raw = report_file.read()
        log_file.seek(0)
        log_tail = log_file.read()[-2000:].decode("utf-8", errors="replace")
    report = json.loads(raw) if raw else {}
    if "setup_error" in report:
        raise SandboxError(f"sandbox setup failed: {report['setup_error']}")
    # Missing results mean the launcher died early (the overall budget ran out, or a program killed it where
    # no pid namespace protects it): the program's doing, reported as a time-out or an error, never raised.
    results = [_to_result(r, limits, p.layers) for r in report.get("results", [])]
    missing = SandboxResult("timeout" if timed_out else "error", None, None, "", log_tail, 0.0, p.layers)
    return results + [missing] * (len(stdins) - len(results))


def _to_result(r: dict, limits: Limits, layers: tuple[str, ...]) -> SandboxResult:
    exit_code, sig = (r["exit"], None) if r["exit"] >= 0 else (None, -r["exit"])
    cpu_limit_hit = sig == signal.SIGXCPU or (sig == signal.SIGKILL and r["cpu_s"] >= limits.cpu_s - 0.05)
    if r["timed_out"] or cpu_limit_hit:
        status = "timeout"  # wall clock, or RLIMIT_CPU (soft limit SIGXCPU, hard limit SIGKILL a second later)
    else:
        status = "ok" if exit_code == 0 else "error"
    return SandboxResult(status, exit_code, sig, r["out"][0], r["out"][1], r["wall_s"], layers)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------------------------------------------
# The sandbox-fusion backend.


def _run_fusion(url: str, code: str, stdin: str, limits: Limits) -> SandboxResult:
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
    import urllib.error  # imported here: the launcher (this file run as a script) never needs them
    import urllib.request

    body = json.dumps(payload).encode()
    start = time.monotonic()
    response = None
    for attempt in range(3):
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=2 * limits.wall_s + 30) as reply:
                response = json.loads(reply.read())
            break
        except urllib.error.HTTPError as exc:
            if exc.code != 504 or attempt == 2:
                raise SandboxError(f"sandbox-fusion HTTP {exc.code} from {url}") from exc
            time.sleep(1.0 + attempt)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SandboxError(f"sandbox-fusion request to {url} failed: {exc}") from exc
    wall = time.monotonic() - start
    if not isinstance(response, dict) or response.get("status") == "SandboxError":
        raise SandboxError(f"sandbox-fusion error: {str(response)[:300]}")
    run = response.get("run_result") or {}
    compile_result = response.get("compile_result") or {}
    exit_code = run.get("return_code")
    if compile_result.get("status") == "TimeLimitExceeded" or run.get("status") == "TimeLimitExceeded":
        status = "timeout"
    elif compile_result.get("status") == "Error" or compile_result.get("return_code") not in (None, 0):
        status = "error"
    else:
        status = "ok" if run.get("status") == "Finished" and exit_code == 0 else "error"
    cap = limits.max_output_bytes
    stdout, stderr = str(run.get("stdout") or "")[:cap], str(run.get("stderr") or "")[:cap]
    return SandboxResult(status, exit_code, None, stdout, stderr, wall, ("sandbox-fusion",))


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == _LAUNCH_FLAG:
        return _launch(int(argv[1]), int(argv[2]))
    logging.basicConfig(level=logging.INFO)
    p = plan()
    print("layers:", ", ".join(p.layers))
    print("python:", p.python)
    code = argv[0] if argv else "import os, sys; print('pid', os.getpid(), 'cwd', os.getcwd(), sys.version)"
    print(run_python(code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
