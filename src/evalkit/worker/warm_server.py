"""`python -m evalkit.worker.warm_server <adapter target> <padding> [module ...]`: a warm server from which a job's
workers are forked.

A worker started as a fresh interpreter pays its imports on every job (torch about 1.5 s here, a wrapper up to
several more). This server imports torch, evalkit's worker, the adapter's module and the wrapper's modules once
(the trainer config's `modules`, given by the controller), runs nothing else (no training, no thread pool, no CUDA),
then forks one child per worker the controller asks for. Each child is a fresh copy of that state: nothing a job
does reaches the server or the next job. In the child, before the worker runs anything: a new session, the worker's
own environment (rank, rendezvous, threads), its log file as stdout and stderr, its CPUs, the RNGs reseeded from the
OS as a fresh interpreter's are, and `names.CONTROLLER_PID_ENV` set to this server (which dies with the controller:
the chain holds).
From outside (ps, /proc, py-spy) a forked worker looks like a fresh one: its command line is rewritten in place to
`python -m evalkit.worker <run dir>` and its /proc environ to its own environment, into room the controller leaves
at the server's start (`names.PROC_ROOM` bytes of padding, an argument and `names.PROC_ROOM_ENV`); where they do not
fit, they stay the server's. One server serves every thread count: the child sets its own (`OMP_NUM_THREADS`, read
by the OpenMP runtime only when the server loaded it) with torch.set_num_threads before anything runs.

Protocol, JSON lines: the server writes `{"ready": {...}}` (or `{"refused": "why"}` and exits) once its imports
are done; then reads `{"fork": id, "job_dir", "env", "log"}` on stdin and answers `{"forked": id, "pid": pid}`,
and `{"exited": pid, "code": code}` when a child ends (a negative code: killed by that signal, as Popen's). It ends
when stdin closes, killing the children left.
"""
from __future__ import annotations

import importlib
import io
import json
import os
import select
import signal
import sys
import threading
import time
import traceback

from evalkit import names
from evalkit.worker import working_directory_last


def rewrite_proc(field: int, items: list[str]) -> bool:
    """Rewrite this process's argument area (`field` 48: /proc/self/cmdline) or environment area (50:
    /proc/self/environ) in place with `items`, NUL-separated; False where they do not fit (or the kernel refuses)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()     # fields[0] is proc(5)'s field 3
        start, end = int(fields[field - 3]), int(fields[field - 2])
        data = b"\0".join(item.encode() for item in items) + b"\0"
        if len(data) > end - start:
            return False
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            mem.write(data.ljust(end - start, b"\0"))
        return True
    except (OSError, ValueError, IndexError):
        return False


def show_as(argv: list[str], env: dict[str, str]) -> None:
    """What ps and /proc show of this process: `argv` and `env` (the padding left out)."""
    rewrite_proc(48, argv)
    rewrite_proc(50, [f"{k}={v}" for k, v in env.items() if k != names.PROC_ROOM_ENV])


def _send(message: dict) -> None:
    sys.__stdout__.write(json.dumps(message) + "\n")
    sys.__stdout__.flush()


def preload(target: str, wrapper_modules: list[str]) -> dict:
    """Import torch, the worker, the adapter's module and the wrapper's modules; what was imported and how long it
    took. A module that fails to import is left to the worker, which reports it as it would in a fresh interpreter."""
    started = time.monotonic()
    import torch

    from evalkit.worker.run import warm_up_torch

    # The modules torch loads lazily at a first backward and optimizer step (about 800, 1.2 s here: torch._dynamo,
    # sympy, ...), loaded here with one thread so that no thread pool is created; the worker warms up again itself.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        warm_up_torch()
    finally:
        torch.set_num_threads(threads)
    modules, failed = ["torch", "evalkit.worker.run"], None
    try:
        module_name, _, class_name = target.rpartition(".")
        getattr(importlib.import_module(module_name), class_name)
        for name in wrapper_modules:
            importlib.import_module(name)
        modules += [module_name, *wrapper_modules]
    except Exception as exc:  # noqa: BLE001 - the worker raises it again, in its own log, with evalkit's message
        failed = f"{type(exc).__name__}: {exc}"
    return {"modules": modules, "import_s": round(time.monotonic() - started, 3), "failed": failed}


def unsafe_to_fork() -> str | None:
    """Why forking from this process would not give a clean worker, or None. Native threads of libraries that
    handle a fork themselves (numpy's OpenBLAS pool, shut down and restarted by its own fork handlers) are not
    counted: only Python threads, which a fork would leave half-copied, and CUDA."""
    import torch

    if threading.active_count() > 1:
        return f"{threading.active_count()} threads running after the imports (a fork copies none of them)"
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return "CUDA initialised by the imports (a forked child cannot use it)"
    return None


def child_environment(env: dict[str, str], imported: dict[str, str], before: dict[str, str]) -> dict[str, str]:
    """A forked worker's environment: the one it is given, then what the server's imports did to the server's, as a
    fresh interpreter's imports would do to its own. A variable the child is given and the server started without
    (its rank, its threads: set per child) stays as given."""
    out = dict(env)
    for key, value in imported.items():
        if key not in env or env[key] == before.get(key):
            out[key] = value
    return out


def _child(job_dir: str, env: dict[str, str], log: str, server_pid: int, imported: dict[str, str],
           before: dict[str, str]) -> None:
    """In the forked child: become the worker, run it, and never return. `imported`: what the server's imports set
    in its environment, which started as `before`."""
    code = 1
    try:
        os.setsid()
        os.environ.clear()
        os.environ.update(child_environment(env, imported, before))
        os.environ[names.CONTROLLER_PID_ENV] = str(server_pid)
        show_as([sys.executable, "-m", "evalkit.worker", job_dir], dict(os.environ))
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        if env.get(names.CPUS_ENV) and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {int(c) for c in env[names.CPUS_ENV].split(",")})
        if env.get("OMP_NUM_THREADS"):
            import torch

            torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
        _reseed()
        sys.argv = [sys.argv[0], job_dir]
        from evalkit.worker.run import die_with_controller, run

        die_with_controller()
        code = run(job_dir)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the worker's own crash: in its log, as a fresh interpreter prints it
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) else 1)


def _reseed() -> None:
    """The RNGs a fresh interpreter seeds from the OS (Python's random is reseeded by the fork itself)."""
    import torch

    torch.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def serve(target: str, wrapper_modules: list[str]) -> int:
    from evalkit.worker.run import die_with_controller

    show_as([sys.executable, "-m", "evalkit.worker.warm_server", target], dict(os.environ))
    os.environ.pop(names.PROC_ROOM_ENV, None)
    die_with_controller()
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the controller's to handle
    before = dict(os.environ)
    info = preload(target, wrapper_modules)
    imported = {k: v for k, v in os.environ.items() if before.get(k) != v}   # an adapter setting HF_HUB_OFFLINE
    problem = unsafe_to_fork()
    if problem:
        _send({"refused": problem})
        return 1
    _send({"ready": info})
    children: set[int] = set()
    server_pid = os.getpid()
    stdin = sys.stdin.fileno()
    buffer = b""
    try:
        while True:
            readable, _, _ = select.select([stdin], [], [], 0.05)
            if readable:
                chunk = os.read(stdin, 65536)
                if not chunk:
                    return 0
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    request = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        _child(request["job_dir"], request["env"], request["log"], server_pid, imported, before)
                    children.add(pid)
                    _send({"forked": request["fork"], "pid": pid})
            for pid in list(children):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    children.discard(pid)
                    _send({"exited": pid, "code": os.waitstatus_to_exitcode(status)})
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    working_directory_last()                    # before the server imports any adapter (evalkit.worker)
    code = serve(sys.argv[1], sys.argv[3:])     # sys.argv[2]: the padding (names.PROC_ROOM)
    sys.__stdout__.flush()
    # Nothing of the server's needs tearing down: skip the interpreter's teardown of torch and the wrapper (up to
    # 1.7 s here), which the controller would wait for at the end of every sweep, once per server.
    os._exit(code)
