"""Lines that say what is wrong: a folder given as a config, a data file that is not its suffix's
format, and a UI bound beyond this machine."""

from __future__ import annotations

import pytest

from ragmem.cli import services
from ragmem.config.loading import read_config_file
from ragmem.data.readers import read_records
from ragmem.errors import ConfigError, DataError


def test_a_folder_given_as_a_config_is_named_as_a_folder(tmp_path):
    with pytest.raises(ConfigError) as found:
        read_config_file(tmp_path)
    assert str(found.value) == (f"{tmp_path}: a folder, not a config file (a YAML file such as {tmp_path / 'ragmem.yaml'}; "
                                f"`ragmem init {tmp_path}` writes one)")


@pytest.mark.parametrize("content, hint", [
    ("id,query,reference_answer\n1,q,r\n", "it looks like CSV: name it .csv or set data.format: csv"),
    ('{"id": "1"}\n{"id": "2"}\n', "it looks like JSON Lines, one object per line: name it .jsonl or set data.format: jsonl"),
])
def test_a_file_that_is_not_its_suffixs_format_says_what_it_looks_like(tmp_path, content, hint):
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(DataError) as found:
        read_records(path)
    assert str(found.value).endswith(f"({hint})")


def test_a_ui_bound_beyond_this_machine_is_warned_about(monkeypatch, capsys, tmp_path):
    served = []
    monkeypatch.setattr(services, "serve_ui", lambda *args, **kwargs: served.append(kwargs["host"]))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    services.ui(port=5123, host="0.0.0.0", tracking_uri=uri, workers=1)
    services.ui(port=5123, host="127.0.0.1", tracking_uri=uri, workers=1)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert served == ["0.0.0.0", "127.0.0.1"] and len(warnings) == 1
    assert warnings[0].startswith("warning: --host 0.0.0.0: the MLflow UI has no login, and anyone who can reach this "
                                  "machine on port 5123 can read and delete every run of sqlite:///")


def test_an_interrupt_wrapped_by_the_import_machinery_is_still_an_interrupt():
    """SIGTERM landing while threadpoolctl made a dataclass at import came out as ``RuntimeError:
    Error calling __set_name__`` with the interrupt as its cause, and printed a traceback; the entry
    point finds the interrupt in the chain (ragmem.runtime.interrupts.interrupt_in, as the exits do)."""
    from ragmem.errors import Terminated
    from ragmem.runtime.interrupts import interrupt_in as _interrupt_in

    try:
        try:
            raise Terminated("terminated by signal 15")
        except Terminated as cause:
            raise RuntimeError("Error calling __set_name__ on 'Field' instance") from cause
    except RuntimeError as wrapped:
        assert isinstance(_interrupt_in(wrapped), Terminated)
    assert _interrupt_in(ValueError("a bug")) is None and isinstance(_interrupt_in(KeyboardInterrupt()), KeyboardInterrupt)
