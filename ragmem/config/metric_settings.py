"""The settings of what a run computes: ``metrics`` (the names selected and the metrics of one's own,
``metrics.custom``) and ``rubrics`` (criteria the LLM judge scores). Part of the schema of
:mod:`ragmem.config.settings` (importable from there)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_serializer, model_validator, field_validator

from ragmem.config.sections import Section, setting
from ragmem.metrics.names import check_custom_name, DEFAULT_METRICS
from ragmem.prompts.rubrics import INPUTS as RUBRIC_INPUTS, SCALES as RUBRIC_SCALES


class RubricExample(Section):
    inputs: dict[Literal[RUBRIC_INPUTS], Union[str, list[str]]] = setting({}, "the example's inputs (a subset of the rubric's)")  # type: ignore[valid-type]  # (the choices declared once, as a tuple)
    score: int = Field(description="its score on the rubric's scale")
    reason: str = setting("", "why (shown to the judge)")


class RubricSettings(Section):
    """A criterion of the user's, scored by the LLM judge as the metric ``rubric_<name>`` (see
    :mod:`ragmem.prompts.rubrics`: scales, normalisation, the request)."""

    criteria: str = Field(description="what the judge scores (text)")
    scale: Literal[tuple(RUBRIC_SCALES)] = Field(description="binary (0/1), 1-5 or 0-10; normalised to 0..1")  # type: ignore[valid-type]  # (the choices declared once, as a tuple)
    inputs: Annotated[list[Literal[RUBRIC_INPUTS]], Field(min_length=1)] = Field(  # type: ignore[valid-type]  # (the choices declared once, as a tuple)
        description="what the judge may see: any of query, answer, reference, contexts")
    steps: list[str] = setting([], "evaluation steps, in order")
    examples: list[RubricExample] = setting([], "few-shot examples: {inputs, score, reason}")


class CustomMetricSettings(Section):
    """A metric of one's own: a Python function of one example returning a number or null
    (:mod:`ragmem.metrics.custom`)."""

    name: str = Field(description="the metric's name (lower-case letters, digits and _; not one of ragmem's)")
    target: str = Field(description="module:function, imported from the working directory, the config's folder "
                                    "and import_paths")
    direction: Literal["higher", "lower"] = Field(
        "higher", description="which way is better: higher (a pass, a match) or lower (a count of errors, a "
                              "cost); read by the gates' baseline comparison, compare's order and the report")
    timeout_s: float = Field(60.0, gt=0, description="a call that has not returned after this long is that example's "
                                                     "failure, and abandoned")

    @field_validator("name")
    @classmethod
    def _name(cls, value):
        problem = check_custom_name(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("target")
    @classmethod
    def _target(cls, value):
        module, sep, attr = value.partition(":")
        if not (sep and module.strip() and attr.strip()):
            raise ValueError(f"expected 'module:function', got {value!r}")
        return value


class MetricSettings(Section):
    """Which metrics a run computes: ``metrics: [name, ...]`` (the short form of ``metrics.names``), or
    ``metrics: {names: [...], custom: [{name, target}, ...]}``. ``name in metrics``: a name or a metric of one's own."""

    names: Annotated[list[str], Field(min_length=1)] = setting(list(DEFAULT_METRICS), "metric names (default: all)")
    custom: list[CustomMetricSettings] = setting([], "metrics of one's own: [{name, target: module:function}], "
                                                     "each computed whether names lists it or not")

    @model_validator(mode="before")
    @classmethod
    def _short(cls, value):
        return {"names": value} if isinstance(value, list) else value

    @model_serializer(mode="wrap")
    def _out(self, handler):
        data = handler(self)
        return data["names"] if not self.custom and isinstance(data, dict) else data

    @model_validator(mode="after")
    def _distinct(self):
        seen = set()
        for i, metric in enumerate(self.custom):
            if metric.name in seen:
                raise ValueError(f"metrics.custom[{i}].name: {metric.name} is named twice")
            seen.add(metric.name)
        return self

    @property
    def given(self) -> bool:
        """Whether the config chose the names (a default left alone may be adapted to the data)."""
        return "names" in self.model_fields_set

    @property
    def custom_names(self) -> list[str]:
        return [m.name for m in self.custom]

    @property
    def directions(self) -> dict[str, str]:
        """Each metric of one's own and which way it is better (``metrics.custom[].direction``): what the
        catalogue reads as ``own`` (:mod:`ragmem.metrics.catalogue`)."""
        return {m.name: m.direction for m in self.custom}

    def __contains__(self, name) -> bool:
        return name in self.names or name in self.custom_names

    def with_names(self, names: list[str]) -> "MetricSettings":
        """The same custom metrics with other names (a default adapted to the data)."""
        return self.model_copy(update={"names": list(names)})
