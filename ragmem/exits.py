"""How a ``ragmem`` command ends: one line on stderr and an exit code for every kind of outcome.

    a user mistake (RagmemError)             error: <message>                      2
    an endpoint dead during a run            error: <message>                      3
    a run stored with nothing measured       error: every ... failed (N of M) ...  3
    a full disk (ragmem.runtime.space)       error: the disk is full: PATH (N free ...  3
    a command-line mistake (click)           click's usage line and Error: ...     2 (bare ``ragmem``: help, 0)
    Ctrl+C / SIGTERM                         interrupted: N of M done; resume ...  130 / 143
    anything else (a bug)                    error: internal error: ... (traceback in .ragmem/last-error.log)  1

A run that stopped with work journaled adds ``; resume with: ragmem ... --resume ID`` to its line.
The command then ends through :func:`leave`.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import traceback

import typer

from ragmem.config.secrets import is_secret, MASK, scrub
from ragmem.errors import RagmemError, Stopped
from ragmem.runtime import interrupts, space
from ragmem.runtime.home import ragmem_home
from ragmem.runtime.parallel import stop_pool


INTERRUPTED_EXIT_S = 20.0
#: a thread left running at the exit (started by plug-in code: a metric of one's own) is waited for
#: this long, then the process ends anyway, saying so (:mod:`ragmem.runtime.contained`)
LEFT_THREADS_S = 10.0


def leave(code: int) -> None:
    """End the ``ragmem`` command with ``code`` once everything the interpreter's exit runs first
    has run: non-daemon threads joined, then every ``atexit`` handler (Prefect's drains of its log
    and event queues, logging's flush, temporary folders). What the interpreter does after that
    only frees memory, module by module and object by object: after a 10k-example ``ragmem run``
    (Prefect, MLflow, SQLAlchemy, the run's table) it took 1.2 s, and the prompt waited for it.
    So the process ends there, with ``os._exit``. Should that sequence itself fail, ``sys.exit``.
    Ctrl+C and SIGTERM are ignored from here on: the command has ended and said so; a signal in the
    middle of the exit would only print a traceback of whatever thread or handler it interrupted.
    After an interrupt (130, 143) the exit is bounded: should a thread or an exit handler still hang
    :data:`INTERRUPTED_EXIT_S` later, the process ends anyway (the one line is already printed)."""
    import atexit
    import threading

    interrupts.SAID.set()  # (the wind-down bound of a SIGTERM says nothing more)
    if code in (130, 143):
        interrupts.exit_after(INTERRUPTED_EXIT_S, code)
    for name in ("SIGINT", "SIGTERM"):  # the command is over: an interrupt now has nothing to stop
        try:
            signal.signal(getattr(signal, name), signal.SIG_IGN)
        except (ValueError, OSError):  # not the main thread, or not allowed here
            pass
    _bounded(code)
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's first exit step
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
                pass
    except BaseException:  # noqa: BLE001 (the normal exit runs what is left)
        sys.exit(code)
    os._exit(code)


def _bounded(code: int) -> None:
    """The exit's join of threads, bounded: should a thread that is no daemon (one a plug-in left
    running) still hold the exit :data:`LEFT_THREADS_S` from now, the process ends with ``code``
    and one line naming it."""
    import threading

    def end() -> None:
        left = [t.name for t in threading.enumerate()
                if t.is_alive() and not t.daemon and t is not threading.main_thread()]
        try:
            os.write(2, (f"note: {len(left)} thread(s) still running at the exit were not waited for after "
                         f"{LEFT_THREADS_S:g} s ({', '.join(left[:3])}): started by plug-in code?\n").encode())
        finally:
            os._exit(code)

    timer = threading.Timer(LEFT_THREADS_S, end)
    timer.daemon = True  # (a daemon: the join it bounds must not wait for it)
    timer.start()


def prepare_environment(argv: list[str] | None = None) -> None:
    """Environment defaults for a command (users may set each themselves)."""
    # the command as MLflow's run source (the Source column): its name and config, never an option;
    # set for this command (an inherited value is another command's), read by the runs it creates and
    # by the flow runs a ``ragmem serve`` starts in subprocesses
    words = [a for a in (argv or [])[:2] if not a.startswith("-")]
    if words:
        os.environ["RAGMEM_SOURCE_NAME"] = " ".join(["ragmem", words[0], *words[1:]])
    # a download progress bar per artifact is noise in a terminal table
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow's usage telemetry (events sent to MLflow's servers) off, as Prefect's is for the server
    # ragmem starts (ragmem.orchestration.server.QUIET_ENV); MLFLOW_DISABLE_TELEMETRY=false turns it on
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    # an MLflow tracking server that stops answering: MLflow retries a request 7 times over ~4
    # minutes by default; ragmem bounds that to about half a minute per request
    for key, value in (("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3"), ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                       ("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")):
        os.environ.setdefault(key, value)


#: MLflow's own settings ragmem relies on, which MLflow reads as whole numbers (a bad one would fail
#: at the first request, as an internal error)
_MLFLOW_INTEGERS = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "MLFLOW_HTTP_REQUEST_TIMEOUT")


def check_environment() -> None:
    """The environment variables ragmem sets defaults for (and ``RAGMEM_DISK_RESERVE``) hold whole numbers: one line, exit 2."""
    for name in (*_MLFLOW_INTEGERS, "RAGMEM_DISK_RESERVE"):
        value = os.environ.get(name, "").strip()
        if value and not value.isdigit():
            why = "MLflow reads it as one" if name in _MLFLOW_INTEGERS else "bytes"
            raise RagmemError(f"{name}: expected a whole number ({why}), got {value!r}")


def _click_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """click's usage-error and abort classes: typer (0.2x) raises those of the copy of click it
    vendors (``typer._click``), not ``click``'s own."""
    import click

    usage: list[type[Exception]] = [click.exceptions.ClickException]
    abort: list[type[BaseException]] = [click.exceptions.Abort, getattr(typer, "Abort", click.Abort)]
    try:
        from typer._click import exceptions as vendored
    except ImportError:
        pass
    else:
        usage.append(vendored.ClickException)
    return tuple(usage), tuple(abort)


def _resume_hint(exc: BaseException, argv: list[str]) -> str:
    """``; resume with: ragmem run ... --resume KEY`` when a run stopped with work journaled; for a
    pairwise comparison whose replies are cached, the same command."""
    progress = getattr(exc, "ragmem_progress", None)
    fix = getattr(exc, "fix", None)  # the same settings would fail the same way: say what to change
    if progress and argv and argv[0] == "compare" and progress[-1].endswith("kept in the judge cache"):  # pairwise
        first = f"; correct {fix}, then run" if fix else "; run"
        return f"{first} the same command to ask only the rest: ragmem {shlex.join(_masked_sets(argv))}"
    if progress and argv and argv[0] == "generate":  # (its replies are cached as they arrive: ragmem.testsets.session)
        first = f"; correct {fix}, then go on with" if fix else "; go on with"
        return f"{first}: ragmem {shlex.join(_masked_sets([a for a in argv if a != '--resume']))} --resume"
    if not progress or not argv or argv[0] not in ("run", "sweep"):
        return ""
    if not progress[0]:  # nothing to resume (a racing sweep): the same command again
        first = f"; correct {fix}, then run" if fix else "; run"
        return f"{first} the same command again: ragmem {shlex.join(_masked_sets(argv))}"
    args = [a for i, a in enumerate(argv) if a != "--resume" and (i == 0 or argv[i - 1] != "--resume")
            and not a.startswith("--resume=")]
    first = f"; correct {fix} (a resume may change it), then resume with" if fix else "; resume with"
    return f"{first}: ragmem {shlex.join(_masked_sets(args))} --resume {progress[0]}"


def _masked_sets(args: list[str]) -> list[str]:
    """``--set agent.params.api_key=VALUE`` shown as ``--set agent.params.api_key=***`` (ragmem.config.secrets)."""
    out = []
    for i, arg in enumerate(args):
        key, sep, _ = arg.partition("=")
        is_set = (i > 0 and args[i - 1] == "--set") or arg.startswith("--set=")
        name = key.removeprefix("--set=").rsplit(".", 1)[-1]
        out.append(f"{key}={MASK}" if is_set and sep and is_secret(name) else arg)
    return out


def _close_dask_clusters() -> None:
    """A Dask LocalCluster (``orchestration.task_runner: dask``) an interrupt left open: closed now,
    quietly. Dask's own exit hook would close it after ragmem's line and print a traceback when
    that failed (its event loop already stopping); its workers end with it either way."""
    if "distributed.deploy.spec" not in sys.modules:
        return
    import atexit
    import logging

    from distributed.deploy import spec

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    atexit.unregister(spec.close_clusters)
    try:
        spec.close_clusters()
    except BaseException:  # noqa: BLE001  (a cluster that cannot close now goes with this process)
        pass


def finish(exc: BaseException, argv: list[str]) -> int:
    """Print the one line for ``exc`` (raised by the command run with ``argv``); return the exit code."""
    if isinstance(exc, SystemExit):
        return exc.code if isinstance(exc.code, int) else 0
    if isinstance(exc, RagmemError):  # exit 2; 3 when an endpoint stopped answering during the run
        print(scrub(f"error: {exc}{_resume_hint(exc, argv)}"), file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    if isinstance(exc, typer.Exit):
        return exc.exit_code
    disguised = interrupts.interrupt_in(exc) if isinstance(exc, Exception) and not isinstance(exc, Stopped) else None
    if disguised is not None:  # an interrupt a library turned into an error of its own
        disguised.ragmem_progress = getattr(exc, "ragmem_progress", None)  # type: ignore[attr-defined]
        return finish(disguised, argv)
    if isinstance(exc, (KeyboardInterrupt, Stopped)):  # Ctrl+C, or SIGTERM (Terminated): the run is KILLED
        _close_dask_clusters()
        stop_pool()
        progress = getattr(exc, "ragmem_progress", None)
        done = f": {progress[1]} of {progress[2]} {progress[3] if len(progress) > 3 else 'examples answered'}" if progress else ""
        print(scrub(f"interrupted{done}{_resume_hint(exc, argv)}"), file=sys.stderr)
        return interrupts.exit_code(exc)
    usage, abort = _click_errors()
    if isinstance(exc, usage):  # a command-line mistake: click's own message and usage line
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `ragmem`: the help was shown, not a mistake
            return 0
        exc.show()  # type: ignore[attr-defined]  # (click's and typer's ClickException)
        return exc.exit_code  # type: ignore[attr-defined]
    if isinstance(exc, abort):  # click turns a Ctrl+C or SIGTERM during its own work into Abort
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KeyboardInterrupt):
            return finish(cause, argv)
        print("interrupted", file=sys.stderr)  # an Abort of click's own (a prompt's end of input): still one line
        return 130
    if not isinstance(exc, Exception):
        raise exc
    full = space.as_disk_full(exc, [ragmem_home(), os.getcwd()])
    if full is not None:  # a full disk the command met outside a run (a run names its own: ragmem.run.engine)
        full.ragmem_progress = getattr(exc, "ragmem_progress", None)  # type: ignore[attr-defined]
        return finish(full, argv)

    path = ragmem_home() / "last-error.log"
    kept = str(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(scrub("".join(traceback.format_exception(exc))))
    except OSError as unwritable:  # (the home unwritable: the line still says what went wrong)
        kept = f"not kept: {path}: {unwritable.strerror or unwritable}"
    print(scrub(f"error: internal error: {type(exc).__name__}: {exc} (traceback in {kept}){_resume_hint(exc, argv)}"),
          file=sys.stderr)
    return 1
