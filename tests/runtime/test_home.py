"""One home per project: found upward as git finds ``.git``; the store, the journals and the managed
Prefect server (with its own port) belong to it; ``ragmem init`` makes one. With real Prefect servers:
tests/e2e/test_home.py."""

from __future__ import annotations


import pytest

from ragmem.cli import starter
from ragmem.data.loaders import DataFile, load_dataset
from ragmem.errors import RagmemError
from ragmem.orchestration import server as prefect_server
from ragmem.runtime import home


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGMEM_HOME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "proj" / "sub" / "deeper").mkdir(parents=True)
    return tmp_path / "proj"


def test_the_home_is_the_nearest_folder_upward_with_a_marker_or_a_store(project, monkeypatch):
    deeper = project / "sub" / "deeper"
    monkeypatch.chdir(deeper)
    assert home.project_root() == deeper.resolve()  # nothing above: the working directory
    (project / "mlruns").mkdir()
    assert home.project_root() == project.resolve()  # an existing store
    (project / "sub" / home.MARKER).write_text("format = 1\n")
    assert home.project_root() == (project / "sub").resolve()  # the nearest wins
    (project / "mlruns" / "x").mkdir()  # a file named mlruns is no store
    (deeper / "mlruns").write_text("not a folder")
    assert home.project_root() == (project / "sub").resolve()
    assert home.ragmem_home() == (project / "sub" / ".ragmem").resolve()
    monkeypatch.setenv("RAGMEM_HOME", str(project / "elsewhere"))
    assert home.ragmem_home() == (project / "elsewhere").resolve()


def test_a_relative_sqlite_store_and_artifact_root_are_read_against_the_home(project, monkeypatch):
    (project / home.MARKER).write_text("format = 1\n")
    monkeypatch.chdir(project / "sub")
    root = project.resolve()
    assert home.tracking_uri() == f"sqlite:///{root}/mlruns/mlflow.db"
    assert home.tracking_uri("sqlite:///db/x.db?timeout=5") == f"sqlite:///{root}/db/x.db?timeout=5"
    assert home.tracking_uri("sqlite:////abs/x.db") == "sqlite:////abs/x.db"  # absolute: as it is
    assert home.tracking_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///other.db")
    assert home.tracking_uri() == f"sqlite:///{root}/other.db"
    assert home.artifact_root() == str(root / "mlruns" / "artifacts")
    assert home.artifact_root("s3://bucket/x") == "s3://bucket/x"


def test_init_writes_a_home_that_validates_and_never_overwrites(project, ragmem_main):
    target = project / "new"
    ran = ragmem_main(["init", str(target)])
    assert ran.returncode == 0, ran.stderr
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == [
        "data/examples.jsonl", "ragmem.toml", "ragmem.yaml"]
    assert f"next: cd {target.resolve()} && ragmem run ragmem.yaml" in ran.stderr + ran.stdout
    examples = load_dataset([DataFile(target / "data" / "examples.jsonl")]).examples
    assert len(examples) == 5 and sum(e.label == 0 for e in examples) == 1
    assert all(e.relevant_context_ids and e.contexts and e.generated_answer for e in examples)
    ran = ragmem_main(["validate", str(target / "data" / "examples.jsonl")])
    assert ran.returncode == 0 and "5 records, all valid" in ran.stdout
    (target / "ragmem.yaml").write_text("experiment: mine\n")
    ran = ragmem_main(["init", str(target)])
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1
    assert ran.stderr.startswith(f"error: {target.resolve() / 'ragmem.toml'}: already exists; nothing was written")
    assert (target / "ragmem.yaml").read_text() == "experiment: mine\n"
    assert ragmem_main(["init", str(target), "--force"]).returncode == 0
    assert "experiment: new" in (target / "ragmem.yaml").read_text()


def test_init_on_a_file_is_one_line(project):
    (project / "afile").write_text("x")
    with pytest.raises(RagmemError, match="afile: not a folder"):
        starter.init_home(project / "afile")


def test_a_relative_config_path_is_found_in_the_home_from_a_folder_below(project, monkeypatch, ragmem_main):
    starter.init_home(project)
    monkeypatch.chdir(project / "sub" / "deeper")
    ran = ragmem_main(["run", "ragmem.yaml", "--dry-run"])
    assert ran.returncode == 0, ran.stderr
    assert "5 examples" in ran.stdout + ran.stderr
    ran = ragmem_main(["run", "nothere.yaml", "--dry-run"])
    assert ran.returncode == 2 and "nothere.yaml: config file not found" in ran.stderr


def test_the_shared_server_chooses_its_port_once_and_keeps_it(tmp_path, monkeypatch):
    """Port choice with the machine's state simulated: which ports something listens on, and whether
    the Prefect server there is the shared one (its database in the server's folder)."""
    monkeypatch.delenv("RAGMEM_PREFECT_PORT", raising=False)
    monkeypatch.setenv("RAGMEM_SERVER_HOME", str(tmp_path / "server"))
    ours = str(tmp_path / "server" / "prefect")
    listening: dict[int, str | None] = {4200: str(tmp_path / "someone" / "prefect")}  # port -> its PREFECT_HOME
    monkeypatch.setattr(prefect_server, "_bindable", lambda port: port not in listening)
    monkeypatch.setattr(prefect_server, "server_owner",
                        lambda port: {"pid": 1, "prefect_home": listening[port]} if listening.get(port) else None)
    assert prefect_server.managed_port() == 4200  # nothing recorded yet
    assert prefect_server.choose_port() == 4201  # 4200 is another program's
    assert (tmp_path / "server" / "port").read_text() == "4201\n"
    assert prefect_server.managed_port() == 4201
    listening[4201] = ours  # the shared server now answers there: kept, from any home
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "elsewhere" / ".ragmem"))
    assert prefect_server.choose_port() == 4201
    listening[4201] = str(tmp_path / "someone" / "prefect")  # another program took it meanwhile
    assert prefect_server.choose_port() == 4202
    monkeypatch.setenv("RAGMEM_PREFECT_PORT", "4555")  # named by the user: as it is
    assert prefect_server.choose_port() == 4555 and prefect_server.managed_port() == 4555
    monkeypatch.delenv("RAGMEM_SERVER_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the default folder: one per machine user
    assert prefect_server.server_home() == (tmp_path / "state" / "ragmem" / "prefect-server").resolve()


def test_an_interrupt_click_turned_into_abort_is_still_one_line_with_its_code(capsys):
    """A Ctrl+C or SIGTERM while click parses the command line reaches ragmem as click's Abort."""
    import click

    from ragmem import exits
    from ragmem.errors import Terminated

    for interrupt, code in ((Terminated("terminated by signal 15"), 143), (KeyboardInterrupt(), 130)):
        try:
            try:
                raise interrupt
            except KeyboardInterrupt as exc:
                raise click.exceptions.Abort() from exc
        except click.exceptions.Abort as abort:
            assert exits.finish(abort, ["run", "x.yaml"]) == code
        assert capsys.readouterr().err == "interrupted\n"
    assert exits.finish(click.exceptions.Abort(), ["run"]) == 130  # a prompt answered with Ctrl+D: still a line
    assert capsys.readouterr().err == "interrupted\n"


def test_an_interrupt_typer_would_swallow_is_one_line_with_its_code(ragmem_main, monkeypatch, tmp_path):
    """This typer turns a KeyboardInterrupt into a silent exit 130 (SIGTERM's 143 lost): seen in the
    interrupt test as exit 130 with nothing on stderr when SIGTERM came while a run read its data."""
    from ragmem.cli import app as cli
    from ragmem.cli import services  # (where the validate command lives)
    from ragmem.errors import Terminated

    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "query": "q", "generated_answer": "a"}\n')
    for interrupt, code in ((Terminated("terminated by signal 15"), 143), (KeyboardInterrupt(), 130)):
        def check_file(*args, interrupt=interrupt, **kwargs):
            raise interrupt
        monkeypatch.setattr(services, "check_file", check_file)
        done = ragmem_main(["validate", str(data)])
        assert (done.returncode, done.stderr) == (code, "interrupted\n")
    monkeypatch.setattr(cli, "check_set_flags", lambda argv: None)
    monkeypatch.setattr(cli, "app", lambda **kwargs: 130)  # typer's own 130, before any command began
    done = ragmem_main(["validate", str(data)])
    assert (done.returncode, done.stderr) == (130, "interrupted\n")


def test_an_interrupt_a_library_turned_into_its_own_error_is_still_the_interrupt(capsys):
    """Seen in the interrupt test under load: Prefect's task engine raising ``ValueError: Task run
    is not set`` while it handled a Ctrl+C, and pydantic's serializer reporting the interrupt in a
    message. Both end as the interrupt: its line (with the resume hint), its code."""
    import pydantic

    from ragmem import exits
    from ragmem.runtime import interrupts
    from ragmem.errors import Terminated

    try:
        try:
            raise Terminated("terminated by signal 15")
        except KeyboardInterrupt:
            raise ValueError("Task run is not set")  # noqa: B904  (the context is what is tested)
    except ValueError as exc:
        chained = exc
    chained.ragmem_progress = ("abc123", 5, 10)
    assert isinstance(interrupts.interrupt_in(chained), Terminated)
    assert exits.finish(chained, ["run", "x.yaml"]) == 143
    assert capsys.readouterr().err == "interrupted: 5 of 10 examples answered; resume with: ragmem run x.yaml --resume abc123\n"

    class Model(pydantic.BaseModel):
        x: int

        @pydantic.field_serializer("x")
        def boom(self, value):
            raise KeyboardInterrupt

    try:
        Model(x=1).model_dump()
    except Exception as exc:  # noqa: BLE001 (whatever pydantic makes of it)
        serialised = exc
    assert type(serialised).__name__ == "PydanticSerializationError"
    assert exits.finish(serialised, ["run", "x.yaml"]) == 130 and capsys.readouterr().err == "interrupted\n"
    assert interrupts.interrupt_in(ValueError("Task run is not set")) is None  # a plain error stays one


def test_a_command_that_hangs_after_sigterm_ends_within_its_bound_with_one_line(monkeypatch, tmp_path):
    """Seen in CI: SIGTERM raised inside an import of the main thread while Prefect's threads imported
    the same module, and Prefect's crash handling then waited for ever. In a ragmem command the
    handler arms a bound (interrupts.WIND_DOWN_S): past it, one line and exit 143. In a library
    user's process, nothing is armed. Where it hung is kept: every thread's stack in last-error.log
    (os._exit and stderr patched: no process ends here.)"""
    import threading

    import pytest

    from ragmem.errors import Terminated
    from ragmem.runtime import interrupts

    ended, written = threading.Event(), []
    monkeypatch.setattr(interrupts.os, "_exit", lambda code: (written.append(code), ended.set()))
    real_write = interrupts.os.write  # (os is the process's: other threads' writes, e.g. multiprocessing's
    monkeypatch.setattr(interrupts.os, "write",  # resource tracker, go through; stderr's are kept here)
                        lambda fd, data: written.append((fd, data.decode())) if fd == 2 else real_write(fd, data))
    monkeypatch.setattr(interrupts, "WIND_DOWN_S", 0.05)
    monkeypatch.setattr(interrupts, "_RECEIVED", [])  # (the signals kept: this test's own)
    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path))
    for command in (False, True):
        monkeypatch.setattr(interrupts, "_ENDING", threading.Event())
        monkeypatch.setattr(interrupts, "_COMMAND", threading.Event())
        monkeypatch.setattr(interrupts, "SAID", threading.Event())
        if command:
            interrupts._COMMAND.set()
        with pytest.raises(Terminated):
            interrupts.raise_terminated(15, None)
        assert ended.wait(2.0 if command else 0.3) is command
    (fd, line), code = written
    assert fd == 2 and line.startswith("interrupted: ") and line.count("\n") == 1 and code == 143
    assert f"its threads' stacks in {tmp_path / 'last-error.log'}" in line
    stacks = (tmp_path / "last-error.log").read_text()
    assert "Thread 0x" in stacks and "(most recent call first)" in stacks
