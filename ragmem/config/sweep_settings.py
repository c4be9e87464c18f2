"""The settings of the commands that run or bound more than one evaluation: ``ragmem sweep`` (grid,
objective, constraints, tie-breaks), ``ragmem bench-memory`` (the memory layers) and the quality
gates of ``ragmem run``. Part of the settings schema (:mod:`ragmem.config.settings`, which holds them)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from annotated_types import Ge, Le
from pydantic import Field, field_validator, model_validator

from ragmem.config.sections import Positive, Seconds, Section, setting
from ragmem.config.trace_settings import parse_time

class Objective(Section):
    metric: str = setting("f1", "metric the sweep optimises")
    goal: Literal["maximize", "minimize"] = setting("maximize", "direction")


class Bounds(Section):
    """A lower and/or an upper bound on a metric (at least one)."""

    max: Optional[float] = setting(None, "upper bound")
    min: Optional[float] = setting(None, "lower bound")
    _shape: ClassVar[str] = "{min: X} and/or {max: X}"

    @model_validator(mode="after")
    def _bound(self):
        if self.max is None and self.min is None:
            raise ValueError(f"expected {self._shape}")
        return self


class Constraint(Bounds):
    metric: str = Field(description="metric bounded")
    _shape: ClassVar[str] = "{metric: NAME, max: X} or {metric: NAME, min: X}"


class DriftSettings(Section):
    """A monitor across windows of traffic (:mod:`ragmem.stats.drift`): evidence of a sustained drop
    accumulated window after window."""

    max_drop: Annotated[float, Field(gt=0)] = setting(
        ..., "the sustained drop to catch (a rise for a lower-is-better metric), in the metric's units")
    alpha: Annotated[float, Field(gt=0, lt=1)] = setting(
        0.05, "the chance of a false alarm over the schedule's whole life (the evidence's bar is 1/alpha)")
    baseline_windows: Annotated[int, Ge(1)] = setting(3, "windows seen before a change is looked for")
    since: Optional[str] = setting(
        None, "an ISO time or a duration before now (30d): only windows that start at or after it count "
              "(move it past a drop you have accepted)")

    @field_validator("since")
    @classmethod
    def _time(cls, value: Optional[str]) -> Optional[str]:
        if value is not None:
            parse_time(value)  # (a ValueError that says what is expected)
        return value


class Gate(Bounds):
    """A quality gate: the run fails (exit 3) when the metric is below ``min`` or above ``max``,
    (``max_regression``) significantly worse than the ``baseline`` run by more than that much, or
    (``drift``, windows of traffic) down by ``max_drop`` over the last windows with evidence."""

    max_regression: Optional[Annotated[float, Ge(0)]] = setting(
        None, "fail when significantly worse than the baseline run by more than this (paired test)")
    drift: Optional[DriftSettings] = setting(
        None, "windows of traffic: fail when a sustained drop of max_drop shows across windows")
    _shape: ClassVar[str] = "{min: X}, {max: X} and/or {max_regression: DELTA} (a window of traffic: or {drift: {max_drop: DELTA}})"

    @model_validator(mode="after")
    def _bound(self):
        if self.max is None and self.min is None and self.max_regression is None and self.drift is None:
            raise ValueError(f"expected {self._shape}")
        return self


class TieBreak(Section):
    """A secondary objective: among the configurations tied for best, prefer the one whose grid
    ``setting`` (or ``metric``) is lowest (``goal: minimize``) or highest."""

    metric: Optional[str] = setting(None, "a metric, e.g. avg_latency (or a setting:)")
    goal: Literal["maximize", "minimize"] = setting("minimize", "direction")
    setting: Optional[str] = setting(None, "a grid key, e.g. retriever.top_k")  # (last: it shadows setting())

    @model_validator(mode="after")
    def _one(self):
        if (self.setting is None) == (self.metric is None):
            raise ValueError("expected {setting: KEY, goal: ...} or {metric: NAME, goal: ...}")
        return self


class RaceSettings(Section):
    """How a race (``sweep.method: race``) looks and decides (:mod:`ragmem.stats.racing`)."""

    batch: Annotated[int, Ge(1)] = setting(20, "examples judged between two looks")
    alpha: Annotated[float, Field(gt=0, lt=1)] = setting(
        0.05, "the chance that the best configuration is dropped (split over its tests)")
    indifference: Annotated[float, Ge(0)] = setting(
        0.02, "differences smaller than this on the objective are ties: the race ends when every survivor "
              "is within it of the leader with confidence")


class BudgetSettings(Section):
    """What a race may spend in all (at least one)."""

    judge_requests: Optional[Positive] = setting(None, "judge requests sent, across every configuration")
    usd: Optional[Annotated[float, Field(gt=0)]] = setting(
        None, "dollars spent on the judge, across every configuration (from judge.prices; each request reserved at "
              "the most it could cost before it is sent)")

    @model_validator(mode="after")
    def _one(self):
        if self.judge_requests is None and self.usd is None:
            raise ValueError("expected {judge_requests: N} and/or {usd: X}")
        return self


class Range(Section):
    """A range of a setting for ``sweep.method: tpe``: integers when ``low``, ``high`` (and ``step``)
    are integers, else numbers; ``log`` draws on a log scale."""

    low: Union[int, float] = setting(..., "the least value")
    high: Union[int, float] = setting(..., "the largest value")
    step: Optional[Union[int, float]] = setting(None, "values low, low + step, ... (none: any value)")
    log: bool = setting(False, "drawn on a log scale (low > 0, no step)")

    @model_validator(mode="after")
    def _sane(self):
        if not self.low < self.high:
            raise ValueError(f"expected low < high, got low {self.low} and high {self.high}")
        if self.step is not None and not self.step > 0:
            raise ValueError(f"step: expected a number > 0, got {self.step}")
        if self.log and (self.low <= 0 or self.step is not None):
            raise ValueError("log: needs low > 0 and no step")
        return self

    @property
    def integers(self) -> bool:
        return all(isinstance(v, int) and not isinstance(v, bool) for v in (self.low, self.high, self.step or 1))


class SweepSettings(Section):
    method: Literal["grid", "random", "race", "tpe"] = setting(
        "grid", "grid: every point; random: sweep.samples points drawn at random; race: every point raced on "
                "the same examples, a configuration stopped once it is worse than the leader with confidence; "
                "tpe: sweep.trials configurations proposed by Optuna's TPE sampler, each pruned once worse than "
                "the best finished one with confidence")
    race: RaceSettings = setting(RaceSettings, "{batch, alpha, indifference} of sweep.method race (tpe: its "
                                               "batch and alpha prune a trial)")
    budget: Optional[BudgetSettings] = setting(None, "{judge_requests: N} and/or {usd: X}: a race never spends "
                                                     "past it (sweep.method race)")
    grid: dict[str, Union[Annotated[list[Any], Field(min_length=1)], Range]] = setting(
        {}, "dotted.key -> [values] (tpe: or a range {low, high, step?, log?})")
    samples: Optional[Positive] = setting(None, "run N grid points drawn at random (seed)")
    trials: Optional[Positive] = setting(None, "sweep.method tpe: the trials to finish (pruned ones count)")
    objective: Objective = setting(Objective, "{metric, goal}")
    constraints: list[Constraint] = setting([], "[{metric, max?, min?}]")
    tie_break: list[TieBreak] = setting([], "secondary objectives, in order, among the configurations tied "
                                            "for best (not significantly worse than the top one)")
    max_parallel: Annotated[int, Ge(1), Le(64)] = setting(2, "children at once (at most 64)")
    plot_metrics: Optional[list[str]] = setting(None, "metrics plotted against each swept key")

    @model_validator(mode="after")
    def _method(self):
        if self.method == "random" and self.samples is None:
            raise ValueError("method random: expected samples: N (the grid points drawn at random)")
        if self.budget is not None and self.method != "race":
            raise ValueError("budget: needs method race (a grid judges every configuration on every example)")
        if self.method == "tpe" and self.trials is None:
            raise ValueError("method tpe: expected trials: N (the configurations Optuna proposes and ragmem runs)")
        ranged = [k for k, v in self.grid.items() if isinstance(v, Range)]
        if ranged and self.method != "tpe":
            raise ValueError(f"sweep.grid.{ranged[0]}: a range {{low, high}} needs method tpe (a grid, a random draw or a "
                             "race lists its values)")
        return self


#: what an mcp layer's tool arguments may name, per tool ("{name}" in ``args``)
MCP_VALUES = {"add:turn": ("content", "id", "role", "speaker", "timestamp", "user_id"),
              "add:session": ("messages", "user_id", "timestamp"),
              "search": ("query", "user_id", "top_k"), "reset": (),
              "update": ("memory_id", "text", "user_id"), "delete": ("memory_id", "user_id")}
#: ``"{name}"`` in an mcp tool's ``args`` (:func:`ragmem.memory.mcp_layer.fill` replaces them)
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _placeholders(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(PLACEHOLDER.findall(value))
    if isinstance(value, dict):
        return set().union(*(_placeholders(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_placeholders(v) for v in value))
    return set()


class McpTool(Section):
    """One tool of an mcp memory layer and its arguments: ``"{name}"`` is one of ragmem's values
    (:data:`MCP_VALUES`; the whole string: the value itself, a list or a number; inside a longer
    string: its text); anything else is passed as written."""

    name: str = setting(..., "the tool's name on the server")
    args: dict[str, Any] = setting({}, "the tool's arguments")
    per: Literal["turn", "session"] = setting("turn", "add: one call per turn, or per session (messages)")
    results: Optional[str] = setting(None, "search: the dotted path of the list of memories in the reply "
                                           "(default: the reply itself, or its results)")
    text: str = setting("text", "search: a memory's text field (dotted path)")
    id: Optional[str] = setting(None, "search: a memory's field holding the id of the turn it came from (dotted "
                                      "path; none: no ids, recall null)")


class McpTools(Section):
    add: McpTool = setting(..., "the tool that stores a turn (or a session)")
    search: McpTool = setting(..., "the tool that recalls memories")
    reset: Optional[McpTool] = setting(None, "the tool that clears the layer (none: not reset)")
    update: Optional[McpTool] = setting(None, "the tool that rewrites a memory (the lifecycle suite; none: a change "
                                              "is the user's statement)")
    delete: Optional[McpTool] = setting(None, "the tool that deletes a memory (the lifecycle suite; none: a request to "
                                              "forget is the user's statement)")

    @model_validator(mode="after")
    def _mapped(self):
        for role, tool in (("add", self.add), ("search", self.search), ("reset", self.reset), ("update", self.update),
                           ("delete", self.delete)):
            if tool is None:
                continue
            known = MCP_VALUES[f"add:{tool.per}" if role == "add" else role]
            unknown = sorted(_placeholders(tool.args) - set(known))
            if unknown:
                raise ValueError(f"{role}.args: {{{unknown[0]}}} is not a value of {role}"
                                 + (f" per {tool.per}" if role == "add" else "")
                                 + f" (known: {', '.join(known) or 'none'})")
        return self


class MethodSpec(Section):
    name: Optional[str] = setting(None, "name of the method (default: its type)")
    type: Optional[Literal["reference", "full_context", "no_memory", "python", "http", "mcp"]] = setting(
        None, "memory layer")
    target: Optional[str] = setting(None, "module:Class of a python layer")
    params: dict[str, Any] = setting({}, "constructor arguments of a python layer")
    url: Optional[str] = setting(None, "base URL of an http layer; the streamable-HTTP URL of an mcp server")
    command: Optional[list[str]] = setting(None, "the command that starts a stdio mcp server")
    tools: Optional[McpTools] = setting(None, "an mcp layer's tools and their arguments")
    timeout_s: Seconds = setting(60.0, "per request of an http or mcp layer")
    budget_tokens: Optional[Positive] = setting(None, "budget of a full_context layer")

    @model_validator(mode="after")
    def _named(self):
        if self.type is None and self.name is None:
            raise ValueError("expected a name or a type")
        if self.type == "python" and not self.target:
            raise ValueError("target: required for type python")
        if self.type == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError(f"url: expected an http(s) URL for type http, got {self.url!r}")
        if self.type == "mcp":
            if (self.command is None) == (self.url is None):
                raise ValueError("expected either command (a stdio server) or url (streamable HTTP) for type mcp")
            if self.command is not None and not (self.command and all(isinstance(c, str) and c for c in self.command)):
                raise ValueError("command: expected a non-empty list of strings, as [program, arg, ...]")
            if self.url is not None and not self.url.startswith(("http://", "https://")):
                raise ValueError(f"url: expected an http(s) URL for type mcp, got {self.url!r}")
            if self.tools is None:
                raise ValueError("tools: required for type mcp ({add: {name, args}, search: {name, args, ...}, reset?})")
        return self


def _retired(value):
    if value is not None:
        raise ValueError("retired: LoCoMo's category 5 (adversarial) is now always scored, as abstention, in a "
                         "column of its own (abstention J), never in the overall score; remove the setting")
    return value


class BenchSettings(Section):
    dataset: Literal["locomo", "longmemeval", "beam", "lifecycle"] = setting(
        "locomo", "the benchmark: LoCoMo, LongMemEval, BEAM, or ragmem's lifecycle suite (updates and deletions)")
    data: Optional[str] = setting(None, "its data: LoCoMo file, zip or folder; a LongMemEval JSON file")
    methods: list[Union[Literal["reference", "full_context", "no_memory"], MethodSpec]] = setting(
        ["reference", "full_context", "no_memory"], "memory layers")
    top_k: Positive = setting(10, "memories recalled per question")
    full_context_tokens: Positive = setting(4000, "budget of the full-context baseline")
    include_adversarial: Optional[bool] = setting(None, "retired: category 5 is always scored, as abstention, "
                                                        "in its own column (abstention J)")
    _include_adversarial = field_validator("include_adversarial")(lambda cls, value: _retired(value))
    limit_conversations: Optional[Positive] = setting(None, "only the first N conversations (LongMemEval: questions)")
    limit_questions: Optional[Positive] = setting(None, "N questions of each conversation (LongMemEval: in all), "
                                                        "round-robin across the categories")
    baseline: Optional[str] = setting(None, "the method every other is compared with, question by question "
                                            "(default: the first)")
