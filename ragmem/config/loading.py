"""Run configuration: YAML files, API keyword arguments, ``--set dotted.key=value`` overrides, and
the validated, typed :class:`RunConfig` built from them.

Every setting, its type, default and allowed values are declared once, in :mod:`ragmem.config.settings`;
this module reads and merges what the user wrote and validates it against the schema, once (the
checks that need more than the schema: :mod:`ragmem.run.prepare`). Relative data paths in a config file are resolved against the
file's folder; paths given on the command line (``--data``) against the working directory.
"""

from __future__ import annotations

import copy
import os
import reprlib
import types
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, PrivateAttr, ValidationError
from pydantic.fields import FieldInfo

from ragmem.config import secrets
from ragmem.config.settings import Settings
from ragmem.data import published
from ragmem.data.loaders import DataFile
from ragmem.data.readers import check_path, detect_format
from ragmem.errors import ConfigError
from ragmem.runtime import home
from ragmem.runtime.home import DEFAULT_ARTIFACT_ROOT, DEFAULT_TRACKING_URI

__all__ = ["RunConfig", "resolve_config", "resolve_settings", "validate", "assign", "parse_override", "read_config_file", "DEFAULTS",
           "as_section", "describe_error", "expected",
           "DEFAULT_TRACKING_URI", "DEFAULT_ARTIFACT_ROOT"]


# ---- error messages -----------------------------------------------------------------------------

def _unwrap(tp: Any) -> tuple[Any, list[Any]]:
    """``Annotated[X, m1, m2]`` -> (X, [m1, m2]); anything else -> (tp, [])."""
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        inner, more = _unwrap(base)
        return inner, [*meta, *more]
    return tp, []


def _optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (Union, types.UnionType):
        members = [m for m in get_args(tp) if m is not type(None)]
        if len(members) < len(get_args(tp)):
            return (members[0] if len(members) == 1 else Union[tuple(members)]), True
    return tp, False


def _field_type(field: FieldInfo) -> Any:
    return Annotated[tuple([field.annotation, *field.metadata])] if field.metadata else field.annotation


def expected(tp: Any) -> str:
    """What a type accepts, in words: ``a number > 0``, ``one of bm25, tfidf``, ``true or false``."""
    tp, optional = _optional(tp)
    base, meta = _unwrap(tp)
    base, optional_inner = _optional(base)
    optional = optional or optional_inner
    limits = {attr: getattr(m, attr) for m in meta for attr in ("gt", "ge", "lt", "le")
              if getattr(m, attr, None) is not None and not isinstance(m, FieldInfo)}
    if set(limits) == {"ge", "le"}:
        bounds = [f"between {limits['ge']} and {limits['le']}"]
    else:
        signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
        bounds = [f"{signs[attr]} {value}" for attr, value in limits.items()]
    origin = get_origin(base)
    if base is bool:
        text = "true or false"
    elif base is int:
        text = "an integer" + (" " + " and ".join(bounds) if bounds else "")
    elif base is float:
        text = "a number" + (" " + " and ".join(bounds) if bounds else "")
    elif base is str:
        text = "text"
    elif origin is Literal:
        text = "one of " + ", ".join(str(a) for a in get_args(base))
    elif origin is list:
        (item,) = get_args(base) or (Any,)
        text = "a non-empty list" if any(getattr(m, "min_length", 0) for m in meta) else "a list"
        if item is not Any:
            text += f" of {_plural(expected(item))}"
    elif origin is dict or base is dict:
        text = "a mapping"
    elif isinstance(base, type) and issubclass(base, BaseModel):
        text = "a mapping of " + ", ".join(base.model_fields)
    elif origin in (Union, types.UnionType):
        text = " or ".join(expected(m) for m in get_args(base))
    else:
        text = "a valid value"
    return text + (" or null" if optional else "")


def _plural(text: str) -> str:
    for one, many in (("an integer", "integers"), ("a number", "numbers"), ("a mapping", "mappings")):
        if text.startswith(one):
            return many + text[len(one):]
    return text


def _walk(loc: tuple, root: type[BaseModel], prefix: str = "") -> tuple[str, Any, Any]:
    """The dotted name of ``loc``, the type expected there, and the model holding the last key."""
    tp: Any = root
    parent: Any = None
    dotted = prefix
    for part in loc:
        tp, _ = _optional(_unwrap(tp)[0])
        if isinstance(part, int):
            dotted += f"[{part}]"
            args = get_args(tp)
            tp = args[0] if args else Any
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            parent = tp
            dotted += f".{part}" if dotted else str(part)
            tp = _field_type(tp.model_fields[part]) if part in tp.model_fields else Any
        elif get_origin(tp) is dict:
            dotted += f".{part}"
            tp = get_args(tp)[1]
        elif get_origin(tp) in (Union, types.UnionType):  # a union member's tag: follow that member
            named = [m for m in get_args(tp) if getattr(m, "__name__", "") == part]
            literal = [m for m in get_args(tp) if get_origin(m) is Literal and str(part).startswith("literal")]
            tp = (named or literal or [tp])[0]
    return dotted, tp, parent


def _rank(error: dict) -> int:
    """Which of several errors of one value to show (a union reports one per member)."""
    if error["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return 2
    if error["type"] == "literal_error" and isinstance(error.get("input"), dict):
        return 1
    return 0


def describe_error(exc: ValidationError, root: type[BaseModel] = Settings, prefix: str = "") -> str:
    """One line for the first problem of a validation error: the dotted setting, what is allowed,
    the value given (``root``: the model validated, ``prefix``: its dotted name in the config)."""
    error: Any = min(exc.errors(), key=_rank)  # type: ignore[arg-type]  # (pydantic's ErrorDetails: a dict)
    dotted, tp, parent = _walk(tuple(error["loc"]), root, prefix)
    kind, given = error["type"], error.get("input")
    if kind == "extra_forbidden":
        known = ", ".join(parent.model_fields) if parent is not None else "(none)"
        return f"{dotted}: unknown setting; known at this level: {known}"
    if kind == "missing":
        return f"{dotted}: required"
    if kind in ("value_error", "assertion_error"):
        message = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
        head = message.split(":", 1)[0]
        return message if not dotted or ("." in head and " " not in head) else f"{dotted}: {message}"
    if kind == "string_too_short":
        return f"{dotted}: expected non-empty text, got {given!r}"
    if kind == "string_too_long":
        return f"{dotted}: at most {error['ctx']['max_length']} characters, got {len(given):,}"
    if kind in ("too_short", "list_too_short") and not given:
        return f"{dotted}: expected {expected(tp)}, got an empty list"
    return f"{dotted}: expected {expected(tp)}, got {given_text(given)}"


def given_text(value: Any, limit: int = 80) -> str:
    """A value as an error line quotes it: its repr, cut to ``limit`` characters with how long it was
    (a 10 MB value, or a YAML alias expanded a million times, is one line, made at once)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    if isinstance(value, (dict, list)) and len(value) > 20:
        return f"a {type(value).__name__} of {len(value):,} items"
    short = reprlib.Repr()  # (its settings as attributes: Python 3.10 and 3.11 take no arguments)
    short.maxstring, short.maxother, short.maxlist, short.maxdict, short.maxlevel = limit, limit, 8, 8, 3
    return short.repr(value)


M = TypeVar("M", bound=BaseModel)


def as_section(model: type[M], value: M | dict[str, Any] | None, name: str) -> M:
    """A section's settings from its model or a plain dict (callers of the library), validated the
    same way; ``name`` is the section's dotted name for messages (``judge``, ``embeddings``)."""
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value or {})
    except ValidationError as exc:
        raise ConfigError(describe_error(exc, model, name)) from None


STOP_WHEN_DECIDED = "stop_when_decided"


class RunConfig(Settings):
    """The validated config, with the derived values the steps read."""

    #: a choice made for the data that the config does not say, as a note of the run
    #: (:func:`ragmem.run.prepare.reference_free_defaults`)
    _chosen: str | None = PrivateAttr(default=None)
    #: ``gates.stop_when_decided``: judge in batches and stop once every gate is decided (a key of the
    #: gates' mapping that names no metric: taken out before the gates are validated, put back in :attr:`raw`)
    _stop_when_decided: bool = PrivateAttr(default=False)
    #: a sweep child's hint: the deepest retrieval of the grid points that share its index, so that a
    #: ``retriever.top_k`` grid retrieves once per (index, query) (:class:`ragmem.reference.retrievers.Rankings`)
    _retrieval_depth: int = PrivateAttr(default=0)

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> "RunConfig":
        """Validate a config dict (any subset of the settings); errors are one-line ConfigErrors."""
        if not isinstance(config, dict):
            raise ConfigError(f"expected a mapping of settings, got {type(config).__name__}")
        secrets.remember(config)  # its secrets masked by value in every text written from now on
        gates = config.get("gates")
        stop = gates.get(STOP_WHEN_DECIDED, False) if isinstance(gates, dict) else False
        if not isinstance(stop, bool):
            raise ConfigError(f"gates.{STOP_WHEN_DECIDED}: expected true or false, got {stop!r}")
        if isinstance(gates, dict) and STOP_WHEN_DECIDED in gates:
            config = {**config, "gates": {k: v for k, v in gates.items() if k != STOP_WHEN_DECIDED}}
        cfg = as_section(cls, config, "")
        cfg._stop_when_decided = stop
        return cfg

    @property
    def retrieval_depth(self) -> int:
        return self._retrieval_depth

    @property
    def stops_when_decided(self) -> bool:
        """``gates.stop_when_decided`` (``--stop-when-decided``): judge in batches, stop once decided."""
        return self._stop_when_decided

    @property
    def raw(self) -> dict[str, Any]:
        """Every setting as plain data (what ``config.json`` holds and the flows take)."""
        out = self.model_dump(mode="json")
        if self._stop_when_decided:
            out["gates"][STOP_WHEN_DECIDED] = True
        return out

    @property
    def files(self) -> tuple[DataFile, ...]:
        return tuple(DataFile(Path(f.path), f.label, f.format or self.data.format,  # type: ignore[arg-type]  # (a label)
                              self.data.coerce_numbers,
                              self.data.encoding, self.stats.cluster_by) for f in self.data.files)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.ranking.k)))

    @property
    def tracking_uri(self) -> str:
        return home.tracking_uri(self.tracking.uri)

    @property
    def artifact_root(self) -> str:
        return home.artifact_root(self.tracking.artifact_root)

    def require_data(self) -> None:
        """Data is given, and every file can be read (before any work: a folder, a device, a missing
        file or a symlink loop is named here, not after the Prefect server has started)."""
        if not self.files:
            raise ConfigError("data.files: no dataset given; pass --data PATH or list data.files in the config")
        for data_file in self.files:
            check_path(data_file.path)
            detect_format(data_file.path, data_file.format)


#: Every setting's default, as plain data.
DEFAULTS: dict[str, Any] = Settings().model_dump(mode="json")


def _deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(out.get(key), dict) and isinstance(value, dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``a.b=value`` -> (['a', 'b'], parsed value); the value is read as YAML (``[1, 3]``, ``0.5``)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {text!r}: expected dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def assign(config: dict[str, Any], keys: list[str], value: Any) -> dict[str, Any]:
    """A copy of ``config`` with the setting at ``keys`` replaced by ``value`` (``--set`` semantics).

    Keys are followed through the schema: an unknown key is an error naming what exists there;
    inside a free-form mapping (``sweep.grid``, ``agent.params``, ``judge.prices``) the rest of the
    dotted key is one key (``sweep.grid.retriever.top_k``)."""
    out = copy.deepcopy(config)
    node, depth = out, 0
    model: Any = Settings  # (a section's model, None in a free-form mapping)
    while depth < len(keys):
        part = keys[depth]
        dotted = ".".join(keys[: depth + 1])
        if model is None:  # free-form mapping: the rest is one key
            node[".".join(keys[depth:])] = copy.deepcopy(value)
            return out
        if part not in model.model_fields:
            raise ConfigError(f"{dotted}: unknown setting; known at this level: {', '.join(model.model_fields)}")
        if depth == len(keys) - 1:
            node[part] = copy.deepcopy(value)
            return out
        inner, _ = _optional(_unwrap(_field_type(model.model_fields[part]))[0])
        entry = get_args(inner)[-1] if get_origin(inner) is dict else None
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            model = inner
        elif isinstance(entry, type) and issubclass(entry, BaseModel) and depth + 2 < len(keys):
            # {NAME: section} (rubrics, gates): the next key names an entry, the rest is its section's
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
            if not isinstance(node.get(keys[depth + 1]), dict):
                node[keys[depth + 1]] = {}
            node, model, depth = node[keys[depth + 1]], entry, depth + 2
            continue
        elif get_origin(inner) is dict:
            model = None
        else:
            raise ConfigError(f"{dotted}: is a single setting; it has no {keys[depth + 1]!r}")
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
        depth += 1
    return out


def data_path(value: str, base: Path, setting: str) -> str:
    """A data path as read: ``fetched:NAME/FILE`` in the home's cache (:mod:`ragmem.data.published`), a
    relative path against ``base`` (the config file's folder; the working directory for ``--data``)."""
    if value.startswith(published.PREFIX):
        return published.resolve(value, setting)
    return value if Path(value).is_absolute() else os.path.abspath(base / value)


#: values a config file may expand to, its YAML aliases followed (a config has a few hundred; a file
#: of nested aliases, 1.5 KB, expands to billions, and formatting or copying it would never end)
MAX_CONFIG_VALUES = 100_000


def _expanded_size(value: Any, budget: int) -> int:
    """How many values ``value`` holds, aliases counted each time they are used, counting stops
    past ``budget`` (so that a billion-laughs file is measured in microseconds)."""
    count, stack = 0, [value]
    while stack and count <= budget:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
            count += len(item)
        elif isinstance(item, list):
            stack.extend(item)
    return count


def read_config_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file() and not path.is_absolute():
        found = home.in_home(path)  # `ragmem run ragmem.yaml` from a folder below the home
        path = found if found.is_file() else path
    if not path.is_file():
        if path.is_dir():
            raise ConfigError(f"{path}: a folder, not a config file (a YAML file such as {path / 'ragmem.yaml'}; "
                              f"`ragmem init {path}` writes one)")
        raise ConfigError(f"{path}: config file not found")
    try:
        # libyaml's loader when PyYAML has it (a 10 MB config: 0.3 s against 3 s), the same safe tags
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    if _expanded_size(raw, MAX_CONFIG_VALUES) > MAX_CONFIG_VALUES:
        raise ConfigError(f"{path}: expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases repeated inside "
                          f"each other, a 'billion laughs'?): not read")
    bench = raw.get("bench")
    if isinstance(bench, dict) and isinstance(bench.get("data"), str):
        bench["data"] = data_path(bench["data"], path.parent, "bench.data")
    corpus = raw.get("corpus")  # the reference agent's own corpus file, too
    if isinstance(corpus, dict) and isinstance(corpus.get("path"), str) and corpus["path"] != "bundled":
        corpus["path"] = data_path(corpus["path"], path.parent, "corpus.path")
    generate = raw.get("generate")  # the documents ragmem generate reads
    if isinstance(generate, dict) and isinstance(generate.get("corpus"), str):
        generate["corpus"] = data_path(generate["corpus"], path.parent, "generate.corpus")
    paths = raw.get("import_paths")
    if paths is None or isinstance(paths, list):  # targets import from the config's folder too
        paths = [os.path.abspath(path.parent / p) if isinstance(p, str) else p for p in paths or []]
        raw["import_paths"] = paths + [os.path.abspath(path.parent)]
    files = raw["data"].get("files") if isinstance(raw.get("data"), dict) else None
    if isinstance(files, list):  # resolve data paths against the config file's folder
        for i, item in enumerate(files):
            if isinstance(item, str):
                files[i] = item = {"path": item}
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                item["path"] = data_path(item["path"], path.parent, f"data.files[{i}].path")
    return raw


def validate(config: dict[str, Any]) -> RunConfig:
    """The settings, checked against the schema (:mod:`ragmem.config.settings`): one :class:`RunConfig`.
    What needs more than the schema (gate names, bench methods, sweep grid points) is checked by
    :func:`ragmem.run.prepare.resolve` and :func:`ragmem.run.prepare.sweep_plan`."""
    return RunConfig.from_dict(config)


def resolve_settings(path: str | Path | None = None, overrides: list[str] | None = None,
                     data: str | None = None, extra: dict[str, Any] | None = None) -> RunConfig:
    """Defaults <- config file <- ``extra`` (API keyword arguments) <- ``--set`` <- ``--data``,
    validated once."""
    config: dict[str, Any] = read_config_file(path) if path is not None else {}
    if extra:
        config = _deep_merge(config, extra)
    for text in overrides or []:
        keys, value = parse_override(text)
        config = assign(config, keys, value)
    if data is not None:  # replaces data.files (a list is replaced, never merged)
        config = _deep_merge(config, {"data": {"files": [{"path": data_path(data, Path.cwd(), "--data")}]}})
    return validate(config)


def resolve_config(path: str | Path | None = None, overrides: list[str] | None = None,
                   data: str | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`resolve_settings` as plain data (every setting present)."""
    return resolve_settings(path, overrides, data, extra).raw
