"""The code sandbox (gdpo_verl.rewards.sandbox): each limit is proven by a program that tries to break it.

Infinite loop (CPU limit), sleeping (wall clock), memory bomb (RLIMIT_AS), fork bomb (RLIMIT_NPROC, nothing
survives the run), network (a connection to a port this test opens on 127.0.0.1 must fail), writes outside
the private directory, big files and output, the environment; the sandbox-fusion backend against a local fake
service. More attacks: tests/test_sandbox_attacks_on_cpu.py.
Run: python -m pytest tests/test_sandbox_on_cpu.py
"""

import dataclasses
import http.server
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyseccomp
import pytest

from gdpo_verl.rewards import sandbox
from gdpo_verl.rewards.sandbox import Limits, SandboxError, plan, run_python, run_tests

TIGHT = Limits(cpu_s=1, wall_s=3.0, memory_mb=256, nproc=16, fsize_mb=1, max_output_bytes=10_000)


@pytest.fixture(scope="module")
def layers():
    return set(plan().layers)


def test_runs_a_program_with_stdin():
    result = run_python("name = input()\nprint(f'hello {name}')", "world\n")
    assert result.ok and result.stdout == "hello world\n" and result.exit_code == 0
    assert "rlimits" in result.layers and "tmpfs-dir" in result.layers


@pytest.mark.parametrize(
    "program",
    [
        "print(input())\nexit(3)",
        "quit()",
        "import sys\nprint('x', file=sys.stderr)\nsys.exit('bye')",
        "def g():\n    return 1 / 0\n\nprint(1)\ng()",
        "def f(:\n    pass",
        'import json\nprint(json.dumps({"a": [1, 2]}))',
    ],
)
def test_exits_and_errors_as_python_runs_the_file(program, tmp_path):
    # The same exit code, stdout and stderr as ``python prog.py`` (paths aside): exit()/quit() exist although the
    # jail's interpreter skips ``site``; tracebacks start at the program's own frames, none of the sandbox's.
    path = tmp_path / "prog.py"
    path.write_text(program)
    want = subprocess.run([sys.executable, "-I", str(path)], input="in\n", capture_output=True, text=True)
    got = run_python(program, "in\n")
    assert got.exit_code == want.returncode, got
    assert got.stdout == want.stdout
    assert got.stderr == want.stderr.replace(str(path), "/sandbox/prog.py")


def test_runs_each_test_in_a_fresh_process():
    # Module state does not leak between tests: each run starts from a fresh interpreter.
    results = run_tests("import sys\nseen = globals().setdefault('n', 0)\nprint(input(), seen)", ["a", "b", "c"])
    assert [r.stdout.split() for r in results] == [["a", "0"], ["b", "0"], ["c", "0"]]


def test_infinite_loop_hits_the_cpu_limit():
    started = time.monotonic()
    result = run_python("while True:\n    pass", limits=TIGHT)
    assert result.status == "timeout"
    assert result.signal is not None  # SIGXCPU at 1 s of CPU (SIGKILL one second later at the latest)
    assert time.monotonic() - started < 10


def test_sleep_hits_the_wall_clock_limit():
    started = time.monotonic()
    result = run_python("import time\ntime.sleep(60)", limits=dataclasses.replace(TIGHT, wall_s=0.5))
    assert result.status == "timeout"
    assert time.monotonic() - started < 8


def test_memory_bomb_is_stopped():
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(32 * 2**20))"
    result = run_python(bomb, limits=TIGHT)
    assert result.status == "error" and "MemoryError" in result.stderr


def test_fork_bomb_is_bounded_and_leaves_nothing_behind():
    # The program forks sleeping children until fork fails, prints how many it got and its directory.
    program = (
        "import os, time\n"
        "print(os.getcwd(), flush=True)\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(500):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as e:\n"
        "    print('blocked', n, e.errno)\n"
    )
    result = run_python(program, limits=TIGHT)
    workdir, verdict = result.stdout.splitlines()
    word, forked, errno = verdict.split()
    assert word == "blocked" and int(errno) == 11  # EAGAIN: RLIMIT_NPROC
    assert int(forked) < TIGHT.nproc  # the launcher and the program count too
    assert _processes_in(workdir) == []  # every sleeping child was killed with the run


def test_endless_fork_bomb_ends_with_the_run():
    bomb = "import os\nprint(os.getcwd(), flush=True)\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
    bomb += "        pass"
    started = time.monotonic()
    result = run_python(bomb, limits=dataclasses.replace(TIGHT, wall_s=1.0))
    assert result.status == "timeout" and time.monotonic() - started < 10
    assert _processes_in(result.stdout.split()[0]) == []


def _processes_in(workdir: str) -> list[int]:
    """Pids whose working directory is (or was) ``workdir``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd.removesuffix(" (deleted)") == workdir:
            found.append(int(pid))
    return found


@pytest.fixture
def listener():
    """A TCP server socket on 127.0.0.1 (an ephemeral port), to see whether the sandbox can reach it."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server
    server.close()


CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', int(sys.stdin.read())), timeout=2).close()\n"
    "    print('connected')\n"
    "except OSError as e:\n"
    "    print('refused', type(e).__name__, e.errno)\n"
)


def _no_connection_arrived(server: socket.socket) -> bool:
    return not select.select([server], [], [], 0.2)[0]


def test_network_is_unreachable(listener, layers):
    port = listener.getsockname()[1]
    # Positive control: the same program outside the sandbox does connect.
    outside = socket.create_connection(("127.0.0.1", port), timeout=2)
    listener.accept()[0].close()
    outside.close()
    result = run_python(CONNECT, str(port), limits=TIGHT)
    assert result.stdout.startswith("refused"), result.stdout + result.stderr
    assert _no_connection_arrived(listener)


@pytest.fixture
def world_writable_dir():
    """A directory anyone may write to, so only the sandbox (not file permissions) can stop a write there."""
    path = Path(tempfile.mkdtemp(prefix="gdpo-outside-", dir="/tmp"))
    path.chmod(0o777)
    (path / "secret.txt").write_text("do not read")
    (path / "secret.txt").chmod(0o644)
    yield path
    shutil.rmtree(path)


def test_writes_stay_inside_the_private_directory(world_writable_dir, layers):
    target = world_writable_dir / "pwned.txt"
    program = (
        "import sys\n"
        "open('inside.txt', 'w').write('ok')\n"
        "print(open('inside.txt').read())\n"
        "try:\n"
        "    open(sys.stdin.read(), 'w').write('escaped')\n"
        "    print('wrote outside')\n"
        "except OSError as e:\n"
        "    print('denied', e.errno)\n"
    )
    result = run_python(program, str(target), limits=TIGHT)
    assert result.stdout.split()[:2] == ["ok", "denied"], result.stdout + result.stderr
    assert not target.exists()


def test_reads_outside_system_directories_are_denied(world_writable_dir, layers):
    program = (
        "import sys\ntry:\n    print(open(sys.stdin.read()).read())\nexcept OSError as e:\n    print('denied', e.errno)"
    )
    result = run_python(program, str(world_writable_dir / "secret.txt"), limits=TIGHT)
    assert result.stdout.startswith("denied")


def test_file_size_and_output_are_capped():
    # Writing 4 MiB into a file with a 1 MiB limit fails with EFBIG (Python ignores SIGXFSZ).
    big = "try:\n    open('big', 'wb').write(b'x' * 4 * 2**20)\nexcept OSError as e:\n    print('efbig', e.errno)"
    assert run_python(big, limits=TIGHT).stdout.strip() == "efbig 27"
    # Endless output is cut at the file-size limit, and what comes back at max_output_bytes.
    spam = run_python("while True:\n    print('y' * 1000)", limits=TIGHT)
    assert spam.status == "error" and len(spam.stdout) == TIGHT.max_output_bytes


def test_environment_and_identity_are_private(monkeypatch):
    monkeypatch.setenv("GDPO_TEST_SECRET", "hunter2")
    result = run_python("import os\nprint(sorted(os.environ))\nprint(os.environ['HOME'] == os.getcwd())")
    names, home_is_cwd = result.stdout.splitlines()
    assert "GDPO_TEST_SECRET" not in names and home_is_cwd == "True"


# ------------------------------------------------------------------------------------ sandbox-fusion backend


class _FakeFusion(http.server.BaseHTTPRequestHandler):
    """Answers /run_code like SandboxFusion; the reply is chosen by the program's text."""

    requests: list[dict] = []
    hung_up: list[str] = []  # programs whose client closed the connection before the reply

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeFusion.requests.append(payload)
        code = payload["code"]
        if "HTTP500" in code:
            self.send_response(500)
            self.end_headers()
            return
        if "SLOW" in code:
            time.sleep(3.0)
        if "LISTRESULT" in code:
            reply = {"status": "Success", "run_result": ["not", "an", "object"]}
        elif "BADSTDOUT" in code:
            reply = {"status": "Success", "run_result": {"status": "Finished", "return_code": 0, "stdout": 7}}
        elif "NOTOBJECT" in code:
            reply = [1, 2]
        elif "SANDBOXERROR" in code:
            reply = {"status": "SandboxError", "message": "executor down"}
        elif "TIMEOUT" in code:
            reply = {"status": "Failed", "run_result": {"status": "TimeLimitExceeded", "stdout": "", "stderr": ""}}
        elif "CRASH" in code:
            run = {"status": "Finished", "return_code": 1, "stdout": "", "stderr": "Traceback"}
            reply = {"status": "Failed", "compile_result": None, "run_result": run}
        else:
            run = {"status": "Finished", "return_code": 0, "stdout": payload["stdin"].upper(), "stderr": ""}
            reply = {"status": "Success", "compile_result": None, "run_result": run}
        body = json.dumps(reply).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first (its budget ran out): expected
            _FakeFusion.hung_up.append(code)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def fusion_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeFusion)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/run_code"
    server.shutdown()
    server.server_close()


def test_fusion_backend_maps_statuses(fusion_url):
    ok = run_python("print(input().upper())", "abc", limits=TIGHT, sandbox_fusion_url=fusion_url)
    assert ok.ok and ok.stdout == "ABC" and ok.layers == ("sandbox-fusion",)
    sent = _FakeFusion.requests[-1]
    assert sent["language"] == "python" and sent["stdin"] == "abc" and sent["memory_limit_MB"] == 256
    assert run_python("# TIMEOUT", sandbox_fusion_url=fusion_url).status == "timeout"
    crash = run_python("# CRASH", sandbox_fusion_url=fusion_url)
    assert crash.status == "error" and crash.exit_code == 1
    results = run_tests("print(input())", ["a", "b", "c"], sandbox_fusion_url=fusion_url)
    assert [r.stdout for r in results] == ["A", "B", "C"]


def test_fusion_service_failures_raise(fusion_url):
    with pytest.raises(SandboxError, match="executor down"):
        run_python("# SANDBOXERROR", sandbox_fusion_url=fusion_url)
    with pytest.raises(SandboxError, match="HTTP 500"):
        run_python("# HTTP500", sandbox_fusion_url=fusion_url)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    with pytest.raises(SandboxError, match="failed"):
        run_python("print(1)", sandbox_fusion_url=f"http://127.0.0.1:{port}/run_code")


def test_fusion_budget_is_a_deadline_over_all_calls(fusion_url, capfd):
    # Three tests against a server that answers after 3 s, with a 1 s budget: every request's timeout is what
    # is left of the budget, so the batch returns after about 1 s, each test a time-out.
    started = time.monotonic()
    results = run_tests("# SLOW", ["a", "b", "c"], limits=TIGHT, sandbox_fusion_url=fusion_url, budget_s=1.0)
    assert time.monotonic() - started < 2.0
    assert [r.status for r in results] == ["timeout"] * 3
    # The server answers later into closed connections: that is handled, so no traceback reaches the log.
    deadline = time.monotonic() + 6.0
    while _FakeFusion.hung_up.count("# SLOW") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _FakeFusion.hung_up.count("# SLOW") == 3
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "marker, field",
    [
        ("LISTRESULT", "reply.run_result is list"),
        ("BADSTDOUT", "run_result.stdout is int"),
        ("NOTOBJECT", "reply is list"),
    ],
)
def test_fusion_malformed_replies_raise_naming_the_field(fusion_url, marker, field):
    with pytest.raises(SandboxError, match=field):
        run_python(f"# {marker}", sandbox_fusion_url=fusion_url)


UNPRIVILEGED_RUNNER = """
import json, sys
sys.path[:0] = sys.argv[1].split(':')  # the repository, and where pyseccomp is installed
from gdpo_verl.rewards import sandbox
limits = sandbox.Limits(cpu_s=1, wall_s=3.0, memory_mb=256, nproc=16, fsize_mb=1)
runs = [sandbox.run_python(program, stdin, limits).stdout for program, stdin in json.loads(sys.argv[2])]
print(json.dumps({"layers": sandbox.plan().layers, "stdouts": runs}))
"""
FORK = (
    "import os, time\n"
    "n = 0\n"
    "try:\n"
    "    for _ in range(200):\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(30)\n"
    "            os._exit(0)\n"
    "        n += 1\n"
    "except OSError:\n"
    "    print(n)\n"
)
WRITE = "try:\n    open(input(), 'w').write('x')\n    print('wrote')\nexcept OSError:\n    print('denied')\n"


_UNPRIVILEGED_ENV = {"PATH": "/usr/bin:/bin", "GDPO_SANDBOX_BWRAP": str(sandbox.find_bwrap())}


def test_unprivileged_user_gets_the_same_limits(listener, world_writable_dir):
    """As a non-root user bwrap runs as that user (no uid switch): the limits still hold."""
    setpriv, python = shutil.which("setpriv"), "/usr/bin/python3"
    repo = Path(__file__).resolve().parents[1]
    if os.geteuid() != 0 or setpriv is None or not os.path.exists(python):
        pytest.skip("needs root (to become another user), setpriv and /usr/bin/python3")
    if subprocess.run([python, "-c", "import sys; sys.exit(sys.version_info < (3, 10))"]).returncode:
        pytest.skip(f"{python} is older than Python 3.10")
    if not all(os.stat(p).st_mode & 0o005 == 0o005 for p in [repo, *repo.parents]):
        pytest.skip(f"{repo} is not readable by other users")
    target = world_writable_dir / "pwned.txt"
    runs = [(FORK, ""), (CONNECT, str(listener.getsockname()[1])), (WRITE, str(target))]
    argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", python, "-I", "-c", UNPRIVILEGED_RUNNER]
    argv += [f"{repo}:{Path(pyseccomp.__file__).parent}", json.dumps(runs)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/tmp", env=_UNPRIVILEGED_ENV)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    forked, connect, write = report["stdouts"]
    assert "netns" in report["layers"] and "uid-drop" not in report["layers"]
    assert int(forked) < 16
    assert connect.startswith("refused") and _no_connection_arrived(listener)
    assert write.strip() == "denied" and not target.exists()


def test_missing_libseccomp_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import fails as if it were not installed
    with pytest.raises(SandboxError, match="pip install pyseccomp.*libseccomp2.*sandbox_fusion_url"):
        sandbox.build_filters()
