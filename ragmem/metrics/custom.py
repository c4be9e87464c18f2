"""Metrics of one's own (``metrics.custom``): a Python function of one example, returning a number or null.

A team's domain check (a regex, a JSON schema, a unit conversion) is a plain function whose
parameters name what it reads of an example::

    def order_id_format(answer):                 # metrics.custom: [{name: order_id_format,
        return bool(re.search(r"ORD-\\d{6}", answer))  #   target: checks:order_id_format}]

Parameters it may take (any subset, by name; ``**kwargs`` takes them all): ``query``, ``answer``,
``reference`` (the reference answer, ``None`` without one), ``contexts`` (their texts), ``context_ids``,
``history`` (a conversation's earlier turns), ``id``, ``label``, ``latency_s``, ``session_id``, and
``example`` (all of them as one read-only mapping). Per example::

    value = float(fn(...))   # a bool is 1.0 / 0.0; None or NaN: null (not defined for this example);
                             # inf or -inf: a failure of that example (its reason: returned inf)

and per run ``name = mean of the values over the examples whose agent call succeeded`` (null when
none has a value), with its bootstrap interval, its paired comparison and its gates like any metric.
An example whose agent call failed is not asked. A function that raises, or returns what is not a
number, fails on that example only: its value is null, the reason is in the column
``<name>_error``, and ``<name>_failures`` counts them (never a 0). The function's source hash is
part of its signature (the run's param ``metrics.custom.<name>``), so two runs scored by different
code are told apart.

>>> import pandas as pd
>>> def has_digit(answer):
...     if answer == "boom":
...         raise ValueError("cannot parse")
...     return any(c.isdigit() for c in answer)
>>> metric = CustomMetric.of("has_digit", has_digit, "given:has_digit")
>>> table = pd.DataFrame({"id": ["a", "b", "c", "d"], "query": ["q"] * 4,
...                       "generated_answer": ["7 days", "soon", "boom", None],
...                       "reference_answer": [None] * 4, "contexts": [[]] * 4,
...                       "error": [None, None, None, "timed out"]})
>>> result = score(list(table.itertuples(index=False)), [metric])
>>> result.values, result.columns["has_digit"], result.columns["has_digit_error"][2]
({'has_digit': 0.5, 'has_digit_failures': 1.0}, [1.0, 0.0, None, None], 'ValueError: cannot parse')
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import math
import types
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pandas as pd

from ragmem.errors import ConfigError, failure_message
from ragmem.metrics import names, needs
from ragmem.metrics.base import counted_note, failed, Family, mean_aggregator, MetricResult, nanmean, scored_mask
from ragmem.runtime.contained import Contained
from ragmem.runtime.targets import resolve

#: what a function may read of an example, by parameter name
ARGUMENTS = ("query", "answer", "reference", "contexts", "context_ids", "history", "id", "label", "latency_s",
             "session_id", "example")
def source_hash(fn: Callable[..., Any]) -> str:
    """The first 12 hex digits of the SHA-256 of ``fn``'s source (of its bytecode when the source is
    not on disk: a function defined in a notebook cell or ``python -c``)."""
    target = getattr(fn, "__func__", fn)
    target = target if inspect.isfunction(target) or inspect.isclass(target) else type(target)
    try:
        data = inspect.getsource(target).encode("utf-8")
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        data = code.co_code + repr(code.co_consts).encode() if code is not None else repr(target).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def arguments_of(fn: Callable[..., Any], setting: str) -> tuple[str, ...]:
    """The :data:`ARGUMENTS` ``fn`` takes (a ConfigError naming ``setting`` when it needs another)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise ConfigError(f"{setting}: cannot read the parameters of {fn!r}") from None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return ARGUMENTS
    unknown = [p.name for p in params if p.name not in ARGUMENTS and p.default is p.empty
               and p.kind is not p.VAR_POSITIONAL]
    if unknown:
        raise ConfigError(f"{setting}: the function's parameter {unknown[0]!r} is not one it can be given "
                          f"(a metric takes any of: {', '.join(ARGUMENTS)})")
    return tuple(p.name for p in params if p.name in ARGUMENTS)


@dataclass(frozen=True)
class CustomMetric:
    """One metric of one's own: its name, the target it was loaded from, the function and what it takes."""

    name: str
    target: str
    fn: Callable[..., Any]
    arguments: tuple[str, ...]
    source: str  # sha256 of the function's source, 12 hex digits (:func:`source_hash`)
    direction: str = names.HIGHER  # which way is better (``metrics.custom[].direction``)
    timeout_s: float = 60.0  # a call still running after this long: that example's failure, abandoned

    @classmethod
    def of(cls, name: str, fn: Callable[..., Any], target: str, setting: str = "metrics.custom",
           direction: str = names.HIGHER, timeout_s: float = 60.0) -> "CustomMetric":
        if not callable(fn):
            raise ConfigError(f"{setting}.target: {target} is not callable")
        return cls(name, target, fn, arguments_of(fn, setting), source_hash(fn), direction, timeout_s)

    @property
    def signature(self) -> str:
        """What made the metric's numbers (the run's param ``metrics.custom.<name>``)."""
        better = "|better:lower" if self.direction == names.LOWER else ""  # (read back: catalogue.own_of)
        return f"target:{self.target}|source:sha256:{self.source}|args:{','.join(self.arguments)}{better}"


def load(specs: Sequence[Any], folders: Sequence[str] = ()) -> tuple[CustomMetric, ...]:
    """The config's ``metrics.custom`` entries (``name``, ``target``) imported and checked; a problem is
    one ConfigError naming the entry (``metrics.custom.0.target: cannot import module 'checks'``)."""
    out = []
    for i, spec in enumerate(specs):
        setting = f"metrics.custom[{i}]"
        fn = resolve(spec.target, folders, f"{setting}.target", ConfigError)
        out.append(CustomMetric.of(spec.name, fn, spec.target, setting, getattr(spec, "direction", names.HIGHER),
                                   getattr(spec, "timeout_s", 60.0)))
    return tuple(out)


def _fields(row: Any) -> dict[str, Any]:
    contexts = [c if isinstance(c, dict) else {"text": str(c)} for c in (getattr(row, "contexts", None) or [])]
    label = getattr(row, "label", None)
    latency = getattr(row, "latency_s", None)
    return {
        "query": row.query, "answer": row.generated_answer, "reference": needs.reference(row) or None,
        "contexts": [c.get("text") for c in contexts], "context_ids": [c.get("id") for c in contexts],
        "history": getattr(row, "history", None) if isinstance(getattr(row, "history", None), list) else None,
        "id": getattr(row, "id", None), "label": None if label is None or pd.isna(label) else int(label),
        "latency_s": None if latency is None or pd.isna(latency) else float(latency),
        "session_id": getattr(row, "session_id", None) if isinstance(getattr(row, "session_id", None), str) else None,
    }


def _value(reply: Any) -> tuple[float | None, str | None]:
    """A function's reply as the metric's value, or why it is not one (it is not a number)."""
    if reply is None:
        return None, None
    if isinstance(reply, bool):
        return float(reply), None
    if isinstance(reply, (int, float)) or (hasattr(reply, "dtype") and getattr(reply, "shape", None) == ()):
        try:
            value = float(reply)
        except OverflowError:  # (an int too large for a float)
            return None, "returned a number too large to be a float"
        if math.isinf(value):  # (an infinite score would make the mean infinite: a gate on it would pass)
            return None, f"returned {value}, expected a finite number"
        return (None if math.isnan(value) else value), None
    return None, f"returned {type(reply).__name__}, expected a number, a bool or None"


def score(rows: list, metrics: Sequence[CustomMetric]) -> MetricResult:
    """Each metric's function on every answered row (one call per metric and row)."""
    todo = [i for i, row in enumerate(rows) if not failed(row)]
    result = MetricResult(values={})
    fields = {i: _fields(rows[i]) for i in todo}
    for metric in metrics:
        values: list[float | None] = [None] * len(rows)
        errors: list[str | None] = [None] * len(rows)
        call = Contained(metric.name, metric.timeout_s)  # (sys.exit, os._exit, a hang: that example's failure)
        for i in todo:
            given = fields[i]
            kwargs = {a: (types.MappingProxyType(given) if a == "example" else given[a]) for a in metric.arguments}
            reply, errors[i] = call(metric.fn, kwargs)
            try:  # (the user's function fails on this example only: counted, never 0)
                values[i], errors[i] = _value(reply) if errors[i] is None else (None, errors[i])
            except Exception as exc:  # (a reply whose conversion to a number raises)
                errors[i] = failure_message(exc)[:200]
        call.close()
        failures = [e for e in errors if e is not None]
        result.values[metric.name] = nanmean(values)
        result.values[f"{metric.name}_failures"] = float(len(failures))
        result.columns.update({metric.name: values, f"{metric.name}_error": errors})
        result.undefined[metric.name] = sum(1 for i in todo if values[i] is None and errors[i] is None)
        if failures:
            reason, count = collections.Counter(failures).most_common(1)[0]
            result.notes.append(counted_note(
                f"custom.{metric.name}", lambda n, of, c, name=metric.name, reason=reason:
                f"{name}: its function failed on {n} of {of} answered examples (most often, {c}: {reason})",
                len(failures), len(todo), count))
    return result


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    metrics = [m for m in ctx.custom if m.name in wanted]
    return score(ctx.rows(table), metrics) if metrics else MetricResult(values={})


def aggregators(table: pd.DataFrame, names_, zero_division: float, scorer=None) -> dict:
    """The mean of each named per-example column over the answered rows (a metric of one's own, known
    by its column: a later ``compare`` reads the runs' tables without their config)."""
    ok = scored_mask(table)
    return {n: mean_aggregator(table[n], ok) for n in names_ if n in table and f"{n}_error" in table}


FAMILY = Family(names.CUSTOM, compute, aggregators)
