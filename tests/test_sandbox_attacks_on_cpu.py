"""Attack suite for the code sandbox (gdpo_verl.rewards.sandbox): each case is a program trying to get out.

Every attack asserts that it failed (the program prints SAFE, or the host sees no effect) AND that the run
returned within its budget. ``ATTACKS`` run as the current user (root here: bwrap then runs as a fresh uid),
and again as uid 65534 through ``setpriv`` where that is possible. Run:
python -m pytest tests/test_sandbox_attacks_on_cpu.py
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyseccomp
import pytest

from gdpo_verl.rewards import sandbox
from gdpo_verl.rewards.sandbox import Limits, run_python, run_tests

LIMITS = Limits(cpu_s=1, wall_s=3.0, memory_mb=256, nproc=16, fsize_mb=16, disk_mb=64, max_output_bytes=100_000)
SYSCALLS = ("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "ptrace")
SYSCALLS += ("unshare", "setns", "pidfd_getfd", "process_vm_readv")
BUDGET_S = 8.0  # every attack's run returns within this (the wall limit plus start-up and clean-up)
REPO = Path(__file__).resolve().parents[1]


def attempt(statements: str) -> str:
    """A program that prints ESCAPED when ``statements`` run to the end, SAFE <error> when they raise."""
    body = textwrap.indent(textwrap.dedent(statements).strip(), "    ")
    return (
        "import ctypes, json, os, resource, socket, sys\n"
        "args = json.loads(sys.stdin.read() or '{}')\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def check(ret, what):\n"
        "    if ret != 0:\n"
        "        raise OSError(ctypes.get_errno(), what)\n"
        f"try:\n{body}\n    print('ESCAPED', flush=True)\n"
        "except BaseException as e:\n"
        "    print('SAFE', type(e).__name__, e, flush=True)\n"
    )


# name -> statements that must fail inside the jail (args: the host resources of the ``host`` fixture)
ATTACKS = {
    "unix-pathname-socket": "s = socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ns.connect(args['unix'])",
    "unix-abstract-socket": "s = socket.socket(socket.AF_UNIX)\ns.settimeout(2)\ns.connect(args['abstract'])",
    "docker-socket": "socket.socket(socket.AF_UNIX).connect('/var/run/docker.sock')",
    "tcp-loopback": "socket.create_connection(('127.0.0.1', args['tcp']), timeout=2)",
    "tcp-internet": "socket.create_connection(('1.1.1.1', 443), timeout=2)",
    # The jail has its own loopback: the datagram is sent there, and the host's socket must not receive it.
    "udp-loopback": (
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', args['udp']))\n"
        "if not args.get('outside_the_jail'):\n    raise OSError('sent into the jail loopback (checked by the host)')"
    ),
    "netlink-sees-host-interfaces": (
        "names = [name for _, name in socket.if_nameindex()]\n"
        "if names == ['lo']:\n    raise OSError('only its own loopback: ' + str(names))"
    ),
    "read-etc-shadow": "open('/etc/shadow').read()",
    "read-etc-passwd": "open('/etc/passwd').read()",
    "read-home": "os.listdir(args['home'])",
    "read-repository": "open(args['repo_file']).read()",
    "write-outside": "open(args['outside'], 'w').write('x')",
    "write-system": "open('/usr/lib/pwned', 'w').write('x')",
    "write-tmp": "open('/tmp/pwned', 'w').write('x')",
    "see-host-processes": (
        "pids = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "if len(pids) <= 2:\n    raise OSError('only the jail: ' + str(pids))"
    ),
    "signal-host-process": "os.kill(args['victim'], 9)",
    "kill-everything": "os.kill(-1, 9)\nraise OSError('kill(-1) reached only the jail')",
    "kill-parent": "os.kill(os.getppid(), 9)\nimport time\ntime.sleep(0.3)\nraise OSError('the jail init survived')",
    "ptrace-host-process": "check(libc.ptrace(16, args['victim'], 0, 0), 'ptrace attach')",
    "setuid-root": "os.setuid(0)",
    "raise-rlimits": "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))",
    "raise-nproc": "resource.setrlimit(resource.RLIMIT_NPROC, (10**6, 10**6))",
    "mount-tmpfs": "check(libc.mount(b'none', b'/usr', b'tmpfs', 0, None), 'mount')",
    "remount-usr-rw": "check(libc.mount(None, b'/usr', None, 32 | 4096, None), 'remount')",
    "ctypes-new-user-namespace": "check(libc.unshare(0x10000000), 'unshare(CLONE_NEWUSER)')",
    "ctypes-chroot-escape": "check(libc.chroot(b'/proc/1/root'), 'chroot')\nos.listdir('/root')",
    "raw-device": "open('/dev/sda', 'rb').read(1)",
    "kernel-log": "open('/dev/kmsg').read(1)",
    "cgroup-fs": "open('/sys/fs/cgroup/cgroup.procs', 'w').write('1')",
    "inherited-fds": (
        "fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n"
        "if fds[:3] == [0, 1, 2] and len(fds) == 4:\n    raise OSError('only 0-2 (and the listing): ' + str(fds))"
    ),
    "supplementary-groups": (
        "if set(os.getgroups()) <= {65534}:\n    raise OSError('no supplementary group: ' + str(os.getgroups()))"
    ),
    "environment": "if 'GDPO_ATTACK_SECRET' not in os.environ:\n    raise OSError('clean: ' + str(list(os.environ)))",
    # Writable places beyond the run directory's capped tmpfs: none (no tmpfs under /dev, read-only root).
    "fill-dev": "open('/dev/fill', 'wb').write(b'x' * 2**20)",
    "fill-dev-shm": "os.makedirs('/dev/shm', exist_ok=True)\nopen('/dev/shm/fill', 'wb').write(b'x' * 2**20)",
    "write-root": "open('/pwned', 'w').write('x')",
    "mountinfo-host-paths": (
        "text = open('/proc/self/mountinfo').read()\n"
        "if not [p for p in args['host_paths'] if p in text]:\n    raise OSError('no host path in mountinfo')"
    ),
    # The seccomp filters: each call (with arguments the kernel itself would accept, or reject with another
    # errno) fails with EPERM; mount and unshare only in tests (the supervisor needs them).
    "seccomp-denied-syscalls": (
        "nr, buf = args['nr'], ctypes.create_string_buffer(256)\n"
        "calls = {\n"
        "    'keyctl-read-session': (nr['keyctl'], 11, -3, None, 0), 'keyctl-join': (nr['keyctl'], 1, None),\n"
        "    'add_key': (nr['add_key'], b'user', b'gdpo-planted', b'x', 1, -3),\n"
        "    'request_key': (nr['request_key'], b'user', b'gdpo-trainer-secret', None, 0),\n"
        "    'bpf': (nr['bpf'], 0, buf, 0), 'perf_event_open': (nr['perf_event_open'], None, 0, -1, -1, 0),\n"
        "    'userfaultfd': (nr['userfaultfd'], 0xFFFF), 'io_uring_setup': (nr['io_uring_setup'], 8, buf),\n"
        "    'ptrace-traceme': (nr['ptrace'], 0, 0, 0, 0), 'unshare-nothing': (nr['unshare'], 0),\n"
        "    'setns': (nr['setns'], -1, 0), 'pidfd_getfd': (nr['pidfd_getfd'], -1, 0, 0),\n"
        "    'process_vm_readv': (nr['process_vm_readv'], os.getpid(), None, 0, None, 0, 0),\n"
        "}\n"
        "errnos = {}\n"
        "for name, call in calls.items():\n"
        "    errnos[name] = ctypes.get_errno() if libc.syscall(*call) < 0 else 0\n"
        "if set(errnos.values()) == {1}:\n    raise OSError('every call failed with EPERM')\n"
        "print(errnos)"
    ),
}


@pytest.fixture(scope="module")
def host():
    """Resources on the host a program must not reach, and the check that none was reached."""
    workdir = Path(tempfile.mkdtemp(prefix="gdpo-attack-"))
    workdir.chmod(0o777)
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(str(workdir / "listener.sock"))
    os.chmod(workdir / "listener.sock", 0o777)
    abstract_name = "\0gdpo-attack-" + os.urandom(4).hex()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(abstract_name)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    for listener in (unix, abstract, tcp):
        listener.listen(8)
    for s in (unix, abstract, tcp, udp):
        s.setblocking(False)
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)
    os.environ["GDPO_ATTACK_SECRET"] = "hunter2"
    args = {
        "unix": str(workdir / "listener.sock"),
        "abstract": abstract_name,
        "tcp": tcp.getsockname()[1],
        "udp": udp.getsockname()[1],
        "home": str(Path.home()),
        "repo_file": str(REPO / "pyproject.toml"),
        "outside": str(workdir / "pwned.txt"),
        "victim": victim.pid,
        "nr": {name: pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in SYSCALLS},
        "host_paths": [str(REPO), str(Path(sandbox.find_bwrap()).parent), sys.prefix, str(workdir)],
    }

    def untouched() -> list[str]:
        """What the host saw of the attacks: must be empty."""
        seen = []
        for name, s in (("unix", unix), ("abstract", abstract), ("tcp", tcp)):
            try:
                s.accept()[0].close()
                seen.append(f"a connection on the {name} listener")
            except BlockingIOError:
                pass
        try:
            udp.recv(10)
            seen.append("a UDP datagram")
        except BlockingIOError:
            pass
        if (workdir / "pwned.txt").exists():
            seen.append("a file written outside")
        if victim.poll() is not None:
            seen.append("the host process was killed")
        if _jailed_processes():
            seen.append(f"processes left behind: {_jailed_processes()}")
        return seen

    yield args, untouched
    del os.environ["GDPO_ATTACK_SECRET"]
    victim.kill()
    victim.wait()
    for s in (unix, abstract, tcp, udp):
        s.close()
    shutil.rmtree(workdir)


def _jailed_processes() -> list[int]:
    """Pids on this machine whose working directory is a jail's run directory."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == sandbox._RUN_DIR:
                found.append(int(pid))
        except OSError:
            continue
    return found


def timed_run(program: str, stdin: str = "", limits: Limits = LIMITS) -> sandbox.SandboxResult:
    started = time.monotonic()
    result = run_python(program, stdin, limits)
    assert time.monotonic() - started < BUDGET_S, f"the run took {time.monotonic() - started:.1f} s"
    return result


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_fails(name, host):
    args, untouched = host
    result = timed_run(attempt(ATTACKS[name]), json.dumps(args))
    assert result.stdout.startswith("SAFE"), (result.stdout, result.stderr[-500:])
    assert untouched() == []


def test_a_program_imitating_a_jail_error_is_just_an_error():
    result = timed_run("import sys\nsys.stderr.write('bwrap: Can\\'t mount proc\\n')\nsys.exit(1)")
    assert result.status == "error" and result.exit_code == 1


def test_positive_controls(host):
    """The same attacks do reach the host outside the jail, so the checks above can fail."""
    args, untouched = host
    names = ("unix-pathname-socket", "unix-abstract-socket", "tcp-loopback", "udp-loopback", "read-home")
    for name in (*names, "write-outside"):
        outside = json.dumps({**args, "outside_the_jail": True})
        argv = [sys.executable, "-c", attempt(ATTACKS[name])]
        done = subprocess.run(argv, input=outside, capture_output=True, text=True)
        assert done.stdout.startswith("ESCAPED"), (name, done.stdout, done.stderr)
    assert len(untouched()) == 5  # three connections, one datagram and one file
    os.unlink(args["outside"])
    assert untouched() == []


# ------------------------------------------------------------------------------------ resource attacks


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"


def test_fork_bomb_ends_with_the_run(host):
    result = timed_run(FORK_BOMB, limits=Limits(cpu_s=1, wall_s=1.5, memory_mb=256, nproc=16))
    assert result.status in ("timeout", "error")
    assert host[1]() == []


def test_ten_gigabytes_are_refused():
    result = timed_run("x = bytearray(10 * 2**30)\nprint('allocated')")
    assert result.status == "error" and "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_endless_loop_is_stopped():
    result = timed_run("while True:\n    pass")
    assert result.status == "timeout"


def test_two_hundred_megabytes_of_stdout_are_cut():
    result = timed_run("import sys\nfor _ in range(200):\n    sys.stdout.write('y' * 2**20)")
    # RLIMIT_FSIZE (16 MiB) stops the writes; what comes back is cut at max_output_bytes.
    assert result.status == "error" and "File too large" in result.stderr
    assert len(result.stdout) == LIMITS.max_output_bytes


CHILDREN_MEMORY = """
import os, time
r, w = os.pipe()
for _ in range(6):
    if os.fork() == 0:
        block = b'x' * (150 * 2**20)  # written, so really resident
        os.write(w, os.getpid().to_bytes(4, 'little'))
        time.sleep(10)
        os._exit(0)
os.close(w)
time.sleep(2.0)
os.set_blocking(r, False)
try:
    data = os.read(r, 100)
except BlockingIOError:
    data = b''
allocated = [int.from_bytes(data[i:i + 4], 'little') for i in range(0, len(data), 4)]
alive = [pid for pid in allocated if os.waitpid(pid, os.WNOHANG) == (0, 0)]
print('held', len(alive), 'allocated', len(allocated))
"""


def test_memory_limit_covers_all_processes(host):
    if not sandbox.plan().cgroup_base:
        pytest.skip("no memory cgroup here: memory is bounded per process only (nproc * memory_mb)")
    result = timed_run(CHILDREN_MEMORY)
    held = int(result.stdout.split()[1])
    # At most one 150 MB child alive at a time in 256 MB (the others were killed by the cgroup's OOM killer).
    assert held * 150 <= LIMITS.memory_mb, result.stdout
    assert host[1]() == []


DISK = """
import errno
total = 0
try:
    for i in range(30):
        with open(f'f{i}', 'wb') as f:
            f.write(b'x' * (10 * 2**20))
        total += 10
except OSError as e:
    print('stopped', total, e.errno)
"""


def test_disk_is_capped():
    result = timed_run(DISK)
    word, total, errno = result.stdout.split()
    assert word == "stopped" and int(total) <= LIMITS.disk_mb and int(errno) == 28  # ENOSPC


BACKGROUND = """
import os, sys, time
test = input()
if test == '1' and os.fork() == 0:
    os.setsid()
    time.sleep(30)
    os._exit(0)
print(test, sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
"""


def test_background_child_dies_with_its_test(host):
    started = time.monotonic()
    results = run_tests(BACKGROUND, ["1", "2", "3"], LIMITS)
    assert time.monotonic() - started < BUDGET_S
    # Tests 2 and 3 see only their jail's init and themselves: test 1's setsid child is gone.
    assert [r.stdout.split(" ", 1)[1].strip() for r in results[1:]] == ["[1, 2]", "[1, 2]"]
    assert host[1]() == []


# ------------------------------------------------------------------------------------ as a non-root user

NON_ROOT_RUNNER = """
import json, sys, time
sys.path[:0] = sys.argv[1].split(':')  # the repository, and where pyseccomp is installed
from gdpo_verl.rewards import sandbox
limits = sandbox.Limits(**json.loads(sys.argv[2]))
out = {}
for name, (program, stdin) in json.loads(sys.stdin.read()).items():
    started = time.monotonic()
    result = sandbox.run_python(program, stdin, limits)
    out[name] = [result.status, result.stdout, time.monotonic() - started]
print(json.dumps({"layers": sandbox.plan().layers, "runs": out}))
"""


@pytest.mark.slow
def test_attacks_fail_as_a_non_root_user(host):
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    if os.geteuid() != 0 or setpriv is None or not os.path.exists(python):
        pytest.skip("needs root (to become uid 65534), setpriv and /usr/bin/python3")
    if not all(os.stat(p).st_mode & 0o005 == 0o005 for p in [REPO, *REPO.parents]):
        pytest.skip(f"{REPO} is not readable by other users")
    args, untouched = host
    programs = {name: (attempt(statements), json.dumps(args)) for name, statements in ATTACKS.items()}
    programs["fork-bomb"] = (FORK_BOMB, "")
    programs["disk"] = (DISK, "")
    limits = {"cpu_s": 1, "wall_s": 3.0, "memory_mb": 256, "nproc": 16, "fsize_mb": 16, "disk_mb": 64}
    argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c", NON_ROOT_RUNNER]
    env = {"PATH": "/usr/bin:/bin", "GDPO_SANDBOX_BWRAP": str(sandbox.find_bwrap()), "GDPO_ATTACK_SECRET": "x"}
    done = subprocess.run(
        [*argv, f"{REPO}:{Path(pyseccomp.__file__).parent}", json.dumps(limits)],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/tmp",
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert "uid-drop" not in report["layers"]
    runs = report["runs"]
    for name in ATTACKS:
        status, stdout, wall = runs[name]
        assert stdout.startswith("SAFE") and wall < BUDGET_S, (name, status, stdout)
    assert runs["fork-bomb"][0] in ("timeout", "error") and runs["fork-bomb"][2] < BUDGET_S
    word, total, errno = runs["disk"][1].split()
    assert int(total) <= 64 and int(errno) == 28
    assert untouched() == []


# ------------------------------------------------------------------------------------ keyrings, root and non-root

KEYRING_RUNNER = """
import ctypes, json, subprocess, sys
sys.path[:0] = sys.argv[1].split(':')
from gdpo_verl.rewards import sandbox
libc, keyctl = ctypes.CDLL(None, use_errno=True), int(sys.argv[2])

def linked():
    buf = ctypes.create_string_buffer(4096)
    return len(buf.raw[: max(0, libc.syscall(keyctl, 11, -3, buf, 4096))]) // 4  # KEYCTL_READ of @s: key ids

# A session keyring of this runner's own holding a secret, as pam_keyinit or `keyctl session` gives a trainer.
assert libc.syscall(keyctl, 1, None) > 0
assert libc.syscall(int(sys.argv[3]), b'user', b'gdpo-trainer-secret', b'hunter2', 7, -3) > 0
programs = json.loads(sys.stdin.read())
limits = sandbox.Limits(cpu_s=2, wall_s=5.0, memory_mb=256)
jail = {name: sandbox.run_python(code, '', limits).stdout.strip() for name, code in programs.items()}
after_jail = linked()
run = lambda code: subprocess.run([sys.executable, '-c', code], capture_output=True, text=True).stdout.strip()
outside = {name: run(code) for name, code in programs.items()}  # positive control: the same programs, unjailed
print(json.dumps({"jail": jail, "linked_after_jail": after_jail, "outside": outside, "linked_after_outside": linked()}))
"""
KEYRING_PROGRAMS = {
    "read": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nfound = []\n"
        "if 'gdpo-trainer-secret' in open('/proc/keys').read():\n    found.append('listed in /proc/keys')\n"
        "key = libc.syscall(NR, 10, -3, b'user', b'gdpo-trainer-secret', 0)\n"  # KEYCTL_SEARCH in @s
        "if key > 0:\n    found.append('found by KEYCTL_SEARCH')\n"
        "print(found or 'SAFE')"
    ),
    "plant": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "ids = [libc.syscall(ADD_KEY, b'user', b'gdpo-planted', b'x', 1, ring) for ring in (-3, -4, -5)]\n"
        "print('PLANTED' if max(ids) > 0 else 'SAFE')"
    ),
}


@pytest.mark.parametrize("user", ["root", "non-root"])
def test_keyrings_are_out_of_reach(user):
    """The trainer's session keyring is neither readable from a test nor a place a test can leave a key in."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root (to compare with uid 65534), setpriv and /usr/bin/python3")
    if user == "non-root" and not all(os.stat(p).st_mode & 0o005 == 0o005 for p in [REPO, *REPO.parents]):
        pytest.skip(f"{REPO} is not readable by other users")
    keyctl, add_key = (pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name) for name in ("keyctl", "add_key"))
    programs = {
        name: code.replace("ADD_KEY", str(add_key)).replace("NR", str(keyctl))
        for name, code in KEYRING_PROGRAMS.items()
    }
    argv = [sys.executable, "-c", KEYRING_RUNNER]
    if user == "non-root":
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-I", *argv[1:]]
    env = {"PATH": "/usr/bin:/bin", "GDPO_SANDBOX_BWRAP": str(sandbox.find_bwrap())}
    done = subprocess.run(
        [*argv, f"{REPO}:{Path(pyseccomp.__file__).parent}", str(keyctl), str(add_key)],
        input=json.dumps(programs),
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/tmp",
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["jail"] == {"read": "SAFE", "plant": "SAFE"}, report
    assert report["linked_after_jail"] == 1  # only the runner's own secret
    # Positive control: unjailed, the same programs read the secret and leave a key behind.
    assert report["outside"]["read"] == "['listed in /proc/keys', 'found by KEYCTL_SEARCH']", report
    assert report["outside"]["plant"] == "PLANTED" and report["linked_after_outside"] == 2, report


# ------------------------------------------------------------------------------------ one test against the next

# Test 1 leaves everything it can behind; every test then reports what it finds. Test 1 finding its own traces
# is the positive control (the checks see them when they are there); test 2 must find none.
INFLUENCE = """
import ctypes, os, signal, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
if input() == '1':
    open('planted.txt', 'w').write('x')
    os.makedirs('/sandbox/locked', exist_ok=True)
    os.chmod('/sandbox/locked', 0)
    os.utime('/sandbox', (12345, 12345))
    os.environ['PLANTED'] = '1'
    sys.modules['planted'] = sys
    import builtins
    builtins.PLANTED = True
    seg = libc.shmget(0x6d70, 4096, 0o1666)  # IPC_CREAT: a SysV segment outlives its creator
    libc.shmat.restype = ctypes.c_void_p
    ctypes.memmove(libc.shmat(seg, None, 0), b'planted', 7)
    keep = os.open('/sandbox/planted.txt', os.O_RDONLY)
    os.set_inheritable(keep, True)
    if os.fork() == 0:  # a leftover process holding an abstract socket, in its own session
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        s = socket.socket(socket.AF_UNIX)
        s.bind('\\0gdpo-planted')
        s.listen(1)
        time.sleep(30)
        os._exit(0)
    time.sleep(0.3)
found = []
if os.path.exists('planted.txt') or os.path.exists('/sandbox/locked'):
    found.append('file')
if os.stat('/sandbox').st_mtime == 12345:
    found.append('run-dir times')
if 'PLANTED' in os.environ or 'planted' in sys.modules or hasattr(__builtins__, 'PLANTED'):
    found.append('interpreter state')
if libc.shmget(0x6d70, 4096, 0o666) >= 0:
    found.append('sysv shm')
if len(os.listdir('/proc/self/fd')) > 4:
    found.append('fds ' + str(os.listdir('/proc/self/fd')))
if len([p for p in os.listdir('/proc') if p.isdigit()]) > 2:
    found.append('processes')
probe = socket.socket(socket.AF_UNIX)
try:
    probe.connect('\\0gdpo-planted')
    found.append('abstract socket')
except OSError:
    pass
print(sorted(found) or 'CLEAN', os.getpid())
"""


def test_a_test_cannot_influence_the_next_one(host):
    results = run_tests(INFLUENCE, ["1", "2", "1", "2"], LIMITS)
    reports = [r.stdout.strip().rsplit(" ", 1) for r in results]
    planted = ["abstract socket", "fds ['0', '1', '2', '3', '4']", "file", "interpreter state", "processes"]
    planted += ["run-dir times", "sysv shm"]
    # Each test is pid 2 of a fresh pid namespace; test 1 sees all it planted, test 2 none of it.
    assert reports == [[str(planted), "2"], ["CLEAN", "2"]] * 2, [r.stderr[-800:] for r in results]
    assert host[1]() == []
