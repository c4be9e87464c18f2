"""The judge's own reliability, measured on every run: its agreement with human labels, with
itself across repeated samples (``judge.samples``), and the prediction-powered estimate of the pass
rate a human would give, from a few labels and many judge verdicts.

Per run (the family ``reliability``; logged to MLflow under ``judge/``, see
:func:`ragmem.tracking.lifecycle.metric_key`), each where its inputs exist:

- with labels (examples whose agent call succeeded, with a ``label`` and a verdict; ``n_labelled``):
  ``judge_label_kappa`` (Cohen's kappa of verdicts against labels, :func:`binary_kappa`),
  ``judge_label_agreement`` (raw agreement ``(tp + tn) / n``), ``judge_sensitivity``
  (``tp / (tp + fn)``: the share of examples a human passes that the judge passes too) and
  ``judge_specificity`` (``tn / (tn + fp)``), each with its bootstrap interval; undefined (null,
  never 0) when its denominator is 0;
- with labels on some judged examples and none on others: ``pass_rate_ppi``, the share a human would
  pass, by :func:`ragmem.metrics.estimators.ppi_mean_ci`, computed from sums (:func:`ppi_from_sums`;
  its own interval, not the bootstrap's); ``answer_correctness_ppi`` is the same estimate for
  answer_correctness, whose per-example value is the verdict;
- with ``judge.samples`` N > 1: per example the share of its samples that agree with the majority
  (``judge_agreement``); ``judge_self_agreement`` (its mean), ``judge_flip_rate`` (the share of
  examples whose samples disagree) and ``judge_fleiss_kappa`` (:func:`fleiss_kappa` over the
  examples with all N samples), each with its bootstrap interval;
- with the keyword judge: ``judge_threshold_low_pass_rate`` and ``judge_threshold_high_pass_rate``,
  the pass rate with ``judge.threshold`` 0.1 lower and 0.1 higher: how much pass_rate rests on
  the threshold.

:func:`unreliable` turns the kappa's interval into the one line a run prints when the judge agrees
with the labels no better than chance.

The formulas are :mod:`ragmem.metrics.estimators`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ragmem.metrics import names
from ragmem.metrics.base import (Aggregator, counted_note, Family, MetricResult, mean_aggregator, ratio_aggregator,
                                 scored_mask, unless_note)
from ragmem.metrics.classification import confusion_indicators
from ragmem.metrics.estimators import binary_kappa, majority_odds, pass_rate_ppi, ppi_statistics, vbinary_kappa
from ragmem.metrics.options import DEFAULT_MIN_KAPPA  # (its home: the defaults the schema reads)
from ragmem.schema import LABEL_SET_ASIDE, LABEL_UNBOUND
from ragmem.text import plural

__all__ = ["majority_aggregator", "items_aggregator", "unreliable", "FAMILY", "NAMES"]

NAMES = names.RELIABILITY.selectable
THRESHOLD_STEP = 0.1


def majority_aggregator(values: pd.Series, ok: pd.Series, table: pd.DataFrame) -> Aggregator:
    """The mean of per-example majority verdicts, resampled in two stages: the bootstrap draws the
    examples and, within each drawn example, its ``votes`` judge samples again (with replacement),
    whose majority is that copy's verdict (a tie leaves the copy undecided, out of the mean). The
    number of passing copies of example i among its c copies in one resample is then
    Binomial(c, q_i) and of undecided ones Binomial(c − passes, t_i / (1 − q_i)) (:func:`majority_odds`),
    so each copy gets its own second-stage draw. The votes are the table's ``judge_yes`` of
    ``judge_votes`` (``judge.samples``); examples without samples keep their value, and without those
    columns this is :func:`mean_aggregator`. The interval widens with the judge's noise: an example
    whose samples split 3–2 passes in only 68% of its copies."""
    agg = mean_aggregator(values, ok)
    y = _numeric(table, "judge_yes").fillna(0).to_numpy(dtype=float)
    m = _numeric(table, "judge_votes").fillna(0).to_numpy(dtype=float)
    sampled = (m > 1) & ok.to_numpy(dtype=bool)
    if not sampled.any():
        return agg
    q, t = majority_odds(y[sampled], m[sampled])
    with np.errstate(divide="ignore", invalid="ignore"):
        tie_given_no_pass = np.where(q < 1.0, t / (1.0 - q), 0.0)
    data = agg.data

    def resum(rng: np.random.Generator, counts: np.ndarray) -> np.ndarray:
        fixed = counts[:, ~sampled] @ data[~sampled]
        copies = counts[:, sampled].astype(np.int64)
        passes = rng.binomial(copies, q)
        ties = rng.binomial(copies - passes, np.clip(tie_given_no_pass, 0.0, 1.0))
        return fixed + np.column_stack([passes.sum(axis=1), (copies - ties).sum(axis=1)])

    return Aggregator(agg.kind, agg.data, agg.reduce, agg.vreduce, resum=resum)


def item_votes(replies, verdicts: list[int]) -> list[list[int]] | None:
    """``[yes, samples]`` per judged item of one example (an item asked once: its verdict of 1);
    ``None`` when no item was asked more than once (judge.samples 1: nothing to resample)."""
    if not any(r.votes for r in replies):
        return None
    return [[sum(r.votes), len(r.votes)] if r.votes else [v, 1] for r, v in zip(replies, verdicts)]


def items_aggregator(values: pd.Series, ok: pd.Series, votes: pd.Series, kind: str) -> Aggregator:
    """The mean of a per-example metric built from several judged items (chunk relevance verdicts
    for ``contextual_precision``: ``kind="precision"``; claim verdicts for ``faithfulness``:
    ``kind="mean"``), resampled in two stages like :func:`majority_aggregator`: each drawn copy of an
    example draws each item's majority again from its ``[yes, samples]`` (``votes``: a list per
    example; an item without samples keeps its verdict), and the copy's value is recomputed from
    them (undefined, out of the mean, when an item ties). Each copy draws for itself: the copies of
    one resample are drawn in turn, copy j of every example drawn j times or more."""
    agg = mean_aggregator(values, ok)
    n = len(values)
    defined = agg.data[:, 1] > 0
    rows = [(i, v) for i, v in enumerate(votes.tolist()) if defined[i] and isinstance(v, list) and v
            and any(m > 1 for _, m in v)]
    if not rows:
        return agg
    index = np.array([i for i, _ in rows])
    width = max(len(v) for _, v in rows)
    q, t = np.zeros((len(rows), width)), np.zeros((len(rows), width))
    valid = np.zeros((len(rows), width), dtype=bool)
    for r, (_, v) in enumerate(rows):
        q[r, :len(v)], t[r, :len(v)] = majority_odds(np.array([a for a, _ in v]), np.array([m for _, m in v]))
        valid[r, :len(v)] = True
    fixed_rows = np.ones(n, dtype=bool)
    fixed_rows[index] = False
    data = agg.data

    def value_of(yes: np.ndarray) -> np.ndarray:
        v = (yes & valid).astype(float)
        if kind == "mean":
            return v.sum(axis=2) / valid.sum(axis=1)
        hits = np.cumsum(v, axis=2) / np.arange(1, width + 1)
        relevant = v.sum(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(relevant > 0, (hits * v).sum(axis=2) / relevant, 0.0)

    def resum(rng: np.random.Generator, counts: np.ndarray) -> np.ndarray:
        out = counts[:, fixed_rows] @ data[fixed_rows]
        copies = counts[:, index]
        for j in range(1, int(copies.max(initial=0)) + 1):
            u = rng.random((len(counts), len(rows), width))
            tie = ((u >= q) & (u < q + t) & valid).any(axis=2)
            keep = (copies >= j) & ~tie
            out[:, 0] += np.where(keep, value_of(u < q), 0.0).sum(axis=1)
            out[:, 1] += keep.sum(axis=1)
        return out

    return Aggregator(agg.kind, agg.data, agg.reduce, agg.vreduce, resum=resum)


def unreliable(values: dict, intervals: dict, min_kappa: float = DEFAULT_MIN_KAPPA) -> str | None:
    """The one line a run prints when its judge agrees with the labels no better than chance: the
    upper end of ``judge_label_kappa``'s interval (its value when there is no interval) below
    ``min_kappa`` (``judge.min_kappa``). ``None`` when it does not, or without labels.

    >>> unreliable({"judge_label_kappa": 0.0, "n_labelled": 16}, {"judge_label_kappa": (0.0, 0.0)})[:40]
    'judge unreliable: Cohen kappa with the l'
    >>> unreliable({"judge_label_kappa": 0.27, "n_labelled": 36}, {"judge_label_kappa": (-0.02, 0.55)}) is None
    True
    """
    kappa = values.get("judge_label_kappa")
    if kappa is None:
        return None
    interval = intervals.get("judge_label_kappa")
    upper = interval[1] if interval else kappa
    if upper >= min_kappa:
        return None
    shown = f"{kappa:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")
    n = int(values.get("n_labelled") or 0)
    return (f"judge unreliable: Cohen kappa with the labels {shown} on {n} labelled examples, below "
            f"judge.min_kappa {min_kappa:g} even at its upper end: the judge agrees with the labels no better "
            f"than chance, and the judged numbers of this run (pass_rate, answer_correctness and the other "
            f"judged metrics) should not be trusted")


# ---- the family --------------------------------------------------------------------------------

def _numeric(table: pd.DataFrame, column: str) -> pd.Series:
    if column not in table:
        return pd.Series(np.nan, index=table.index, dtype=float)
    return pd.to_numeric(table[column], errors="coerce").astype(float)


def _judged(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    verdict = _numeric(table, "verdict")
    return verdict, scored_mask(table) & verdict.notna()


def _self_agreement(table: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series] | None:
    """(agreement share, flip indicator, samples) per example with more than one judge sample."""
    votes = _numeric(table, "judge_votes")
    if not (votes > 1).any():
        return None
    yes = _numeric(table, "judge_yes")
    ok = scored_mask(table) & (votes > 1)
    share = (np.maximum(yes, votes - yes) / votes).where(ok)
    flip = ((yes > 0) & (yes < votes)).astype(float).where(ok)
    return share, flip, votes.where(ok)


def _fleiss_aggregator(table: pd.DataFrame, samples: int) -> Aggregator:
    """Fleiss' kappa from column sums: ``[P_i, 1, yes_i, no_i]`` over the examples with all
    ``samples`` samples (see :func:`fleiss_kappa`)."""
    votes, yes = _numeric(table, "judge_votes"), _numeric(table, "judge_yes")
    full = (scored_mask(table) & (votes == samples)).to_numpy(dtype=bool)
    y = np.where(full, yes.fillna(0).to_numpy(), 0.0)
    no = np.where(full, samples - y, 0.0)
    agreement = np.where(full, (y ** 2 + no ** 2 - samples) / (samples * max(samples - 1, 1)), 0.0)
    data = np.column_stack([agreement, full.astype(float), y, no])

    def vreduce(sums: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            p_bar = sums[:, 0] / sums[:, 1]
            total = sums[:, 2] + sums[:, 3]
            chance = (sums[:, 2] / total) ** 2 + (sums[:, 3] / total) ** 2
            kappa = (p_bar - chance) / (1.0 - chance)
        return np.where((sums[:, 1] > 0) & (chance < 1.0 - 1e-12), kappa, np.nan)

    def reduce(s: np.ndarray) -> float | None:
        value = float(vreduce(s[None, :])[0])
        return None if math.isnan(value) else value

    return Aggregator("sum", data, reduce, vreduce)


def _kappa_aggregator(confusion: list[pd.Series]) -> Aggregator:
    """Cohen's kappa from the column sums of the indicators tp, fn, fp, tn."""
    data = np.column_stack([c.to_numpy() for c in confusion])

    def reduce(s: np.ndarray) -> float | None:
        return binary_kappa(*(float(x) for x in s))

    return Aggregator("sum", data, reduce, vbinary_kappa)


#: a threshold figure -> its per-example column (the verdict at the moved threshold) and the move
_MOVED = {"judge_threshold_low_pass_rate": ("verdict_threshold_low", -THRESHOLD_STEP),
          "judge_threshold_high_pass_rate": ("verdict_threshold_high", THRESHOLD_STEP)}


def _moved_verdicts(table: pd.DataFrame, threshold: float) -> dict[str, list[float | None]]:
    """The keyword judge's verdict at ``threshold`` ∓ 0.1 (clipped to 0..1), per judged example:
    ``overlap > moved threshold``; ``None`` where the example was not judged."""
    _, judged = _judged(table)
    overlap = _numeric(table, "overlap")
    judged = judged & overlap.notna()
    out = {}
    for column, step in _MOVED.values():
        moved = min(1.0, max(0.0, threshold + step))
        out[column] = (overlap > moved).astype(float).where(judged, None).tolist()
    return out


def _ppi(table: pd.DataFrame, confidence: float) -> tuple[Aggregator, str | None]:
    """The prediction-powered pass rate's per-example statistics (:func:`ppi_statistics`, its value
    and interval from their sums: :func:`ragmem.metrics.estimators.pass_rate_ppi`), or ``None`` with the reason it is not
    defined. Its interval is its own, not the bootstrap's."""
    verdict, judged = _judged(table)
    label = _numeric(table, "label")
    labelled, unlabelled = judged & label.notna(), judged & label.isna()
    data = ppi_statistics(label.fillna(0).to_numpy(), verdict.fillna(0).to_numpy(), labelled.to_numpy(),
                          unlabelled.to_numpy())

    def reduce(s):
        if s[0] == 0 or s[6] == 0:  # all labelled: the labels' mean is the human pass rate
            return None
        estimate = pass_rate_ppi(s, confidence)
        return None if estimate is None else estimate.estimate

    def interval(s):  # (within [0, 1], the range of a pass rate: pass_rate_ppi says why, and the small-sample correction)
        estimate = pass_rate_ppi(s, confidence) if s[6] else None
        return None if estimate is None else (estimate.low, estimate.high)

    agg = Aggregator("sum", data, reduce, interval=interval)
    if not labelled.any() or not unlabelled.any():
        return agg, None
    if labelled.sum() < 2:
        return agg, unless_note("pass_rate_ppi not computed: fewer than 2 labelled examples", "pass_rate_ppi")
    return agg, None


def compute(table: pd.DataFrame, ctx, wanted) -> MetricResult:
    """Every reliability figure the table's columns support (see the module docstring)."""
    values: dict[str, float | None] = {}
    notes: list[str] = []
    ci: dict[str, tuple[float, float] | None] = {}
    tp, fn, fp, tn = (float(c.sum()) for c in confusion_indicators(table))
    n_labelled = tp + fn + fp + tn
    notes += label_notes(table)
    if n_labelled:
        values["n_labelled"] = n_labelled
        values["judge_label_kappa"] = binary_kappa(tp, fn, fp, tn)
        for name, (num, den) in (("judge_label_agreement", (tp + tn, n_labelled)),
                                 ("judge_sensitivity", (tp, tp + fn)), ("judge_specificity", (tn, tn + fp))):
            values[name] = num / den if den else None
    elif _count(table, LABEL_SET_ASIDE):  # labels there were, but for other answers: null, never a kappa of nothing
        values.update({"n_labelled": 0.0, "judge_label_kappa": None})
    ppi, why = _ppi(table, getattr(ctx, "confidence", 0.95))
    if why:
        notes.append(why)
    statistics: dict[str, Aggregator] = {}
    for name in ("pass_rate_ppi", *(["answer_correctness_ppi"] if "answer_correctness_ppi" in wanted else [])):
        statistics[name] = ppi
        if ppi.value() is not None:
            values[name] = ppi.value()
            ci[name] = ppi.interval(ppi.data.sum(axis=0)) if ppi.interval is not None else None
    judge = getattr(ctx, "judge", None)
    if judge is not None and judge.samples > 1 and judge.temperature == 0:
        notes.append(f"judge.samples {judge.samples} with judge.temperature 0: the samples may be identical "
                     f"(each is sent with its own seed, judge.seed + sample; an endpoint that ignores the seed "
                     f"answers the same every time)")
    spread = _self_agreement(table)
    if spread is not None:
        share, flip, votes = spread
        values["judge_self_agreement"] = float(share.mean())
        values["judge_flip_rate"] = float(flip.mean())
        values["judge_fleiss_kappa"] = _fleiss_aggregator(table, int(votes.max())).value()
        values["n_judge_undecided"] = float(_undecided(table).sum())
    columns: dict[str, list] = {}
    if judge is not None and not judge.asks_llm and "overlap" in table:  # (the keyword judge's overlap)
        columns = _moved_verdicts(table, judge.threshold)
        for name, (column, _) in _MOVED.items():
            values[name] = mean_aggregator(pd.Series(columns[column], dtype=float)).value()
    return MetricResult(values=values, columns=columns, notes=notes, ci=ci, statistics=statistics)


def _count(table: pd.DataFrame, column: str) -> int:
    return int(table[column].notna().sum()) if column in table else 0


def label_notes(table: pd.DataFrame) -> list[str]:
    """Counted notes (a chunked run adds them up) on the labels that do not judge the answer beside
    them: set aside, because the agent answered something else than the answer they judged; or
    naming no answer (compared with whatever the agent answered)."""
    notes: list[str] = []
    aside, unbound = _count(table, LABEL_SET_ASIDE), _count(table, LABEL_UNBOUND)
    if aside:
        notes.append(counted_note("labels.set_aside", lambda n: (
            f"labels: {plural(n, 'label')} set aside: the agent's answer differs from the answer the label judged "
            f"(the record's generated_answer or label_answer_sha256); judge_label_kappa, the agreement figures, "
            f"precision/recall and pass_rate_ppi use only the labels of the answers they judged"), aside))
    if unbound:
        notes.append(counted_note("labels.unbound", lambda n: (
            f"labels: {plural(n, 'label')} name no answer (a record without generated_answer or "
            f"label_answer_sha256): compared with whatever the agent answered"), unbound))
    return notes


def _undecided(table: pd.DataFrame) -> pd.Series:
    """Examples whose judge samples tied (``judge_error`` 'undecided: ...')."""
    if "judge_error" not in table:
        return pd.Series(False, index=table.index)
    return table["judge_error"].map(lambda e: isinstance(e, str) and e.startswith("undecided"))


def aggregators(table: pd.DataFrame, wanted, zero_division: float, scorer=None) -> dict[str, Aggregator]:
    """Per-example statistics of the reliability figures (their bootstrap intervals; pass_rate_ppi
    has its own and none here)."""
    out: dict[str, Aggregator] = {}
    confusion = confusion_indicators(table)
    tp, fn, fp, tn = confusion
    nan = float("nan")
    fractions = {"judge_label_agreement": (tp + tn, tp + fn + fp + tn), "judge_sensitivity": (tp, tp + fn),
                 "judge_specificity": (tn, tn + fp)}
    spread = _self_agreement(table)
    for name in wanted:
        if name == "judge_label_kappa":
            out[name] = _kappa_aggregator(confusion)
        elif name in fractions:
            out[name] = ratio_aggregator(*fractions[name], nan)
        elif name == "judge_fleiss_kappa" and spread is not None:  # (the judge's samples, against each other)
            out[name] = _fleiss_aggregator(table, int(spread[2].max()))
        elif name == "judge_self_agreement" and spread is not None:
            out[name] = mean_aggregator(spread[0])
        elif name == "judge_flip_rate" and spread is not None:
            out[name] = mean_aggregator(spread[1])
        elif name in _MOVED and _MOVED[name][0] in table:
            out[name] = mean_aggregator(table[_MOVED[name][0]])
    return out


FAMILY = Family(names.RELIABILITY, compute, aggregators)
