"""Traces as data, without MLflow: OTLP JSON written by the real OpenTelemetry SDK (OpenInference
attributes) read into records (:mod:`ragmem.data.otlp`, :mod:`ragmem.data.spans`); the mapping's
defaults and overrides; traces that cannot be mapped named with their reason; the seeded sample;
the window."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from ragmem.config.trace_settings import parse_time, TraceMapping
from ragmem.data import otlp, spans
from ragmem.data.spans import sampled
from ragmem.errors import DataError
from tests import traffic


def _records(path, **kwargs):
    return [spans.to_record(t, TraceMapping(**kwargs)) for t in otlp.read(path)]


def test_an_otlp_file_from_the_sdk_maps_to_records(tmp_path):
    planned = traffic.plan(12, raised=2)
    records = _records(traffic.write_otlp(tmp_path / "spans.json", planned))
    assert len(records) == 12
    for p, r in zip(planned, records):
        assert r["query"] == p.query
        assert r["session_id"] == p.session and r["user_id"] == p.user
        rag = [c for c in r["contexts"] if c["source"] == "rag"]
        assert [(c["id"], c["text"]) for c in rag] == p.documents
        assert [c["text"] for c in r["contexts"] if c["source"] == "memory_long"] == [p.memory]
        times = p.times()
        assert r["latency_ms"] == pytest.approx((times["root"][1] - times["root"][0]) / 1e6)
        assert r["timings_ms"] == pytest.approx({stage: (e - s) / 1e6 for stage, (s, e) in times.items()
                                                 if stage != "root"})
        assert r["tokens"] == {"input_tokens": 40 + p.index, "output_tokens": 9, "total_tokens": 49 + p.index}
        if p.raised:
            assert "answer" not in r
            assert r["agent_error"] == f"the trace ended in error: RuntimeError: the agent broke on question {p.index}"
        else:
            assert r["answer"] == p.answer and "agent_error" not in r
    assert sum("agent_error" in r for r in records) == 2


def test_the_mapping_can_be_told_where_the_query_and_answer_are(tmp_path):
    def span(sid, parent, kind, inputs, outputs, status="OK"):
        return spans.Span(sid, parent, sid, kind, 0, 5_000_000, status, None, inputs, outputs)

    trace = spans.Trace("tr-1", 0, [span("r", None, "CHAIN", {"payload": {"q": "why?"}}, {"result": {"text": "because"}})])
    assert spans.to_record(trace, TraceMapping())["agent_error"].startswith("no answer in the root span's outputs")
    told = spans.to_record(trace, TraceMapping(query="payload.q", answer="result.text"))
    assert (told["query"], told["answer"]) == ("why?", "because")
    chat = spans.Trace("tr-2", 0, [span("r", None, "CHAT_MODEL",
                                        {"messages": [{"role": "system", "content": "be brief"},
                                                      {"role": "user", "content": "hi?"}]},
                                        {"choices": [{"message": {"role": "assistant", "content": "hello"}}]})])
    record = spans.to_record(chat, TraceMapping())
    assert (record["query"], record["answer"]) == ("hi?", "hello")
    none = spans.to_record(spans.Trace("tr-3", 0, []), TraceMapping())
    assert none["agent_error"] == "no root span" and none["query"] == "(no input)"
    blank = spans.to_record(spans.Trace("tr-4", 0, [span("r", None, "AGENT", {"n": 3}, "ok")]), TraceMapping())
    assert blank["agent_error"] == "no query in the root span's inputs" and blank["query"] == \
        "(no query: the root's inputs hold n)"  # (the keys, never the values: they may hold a password)


def test_the_sample_is_seeded_and_near_its_share():
    ids = [f"tr-{i:08x}" for i in range(20_000)]
    kept = [i for i in ids if sampled(i, 0.3, seed=7)]
    assert abs(len(kept) / len(ids) - 0.3) < 0.015
    assert kept == [i for i in ids if sampled(i, 0.3, seed=7)]
    assert kept != [i for i in ids if sampled(i, 0.3, seed=8)]


def test_the_window_and_the_limit(tmp_path):
    start = datetime(2026, 12, 1, tzinfo=timezone.utc)
    planned = traffic.plan(10, raised=0, start_ns=int(start.timestamp() * 1e9))
    path = traffic.write_otlp(tmp_path / "spans.json", planned)
    inside = list(otlp.read(path, since=start + timedelta(seconds=3), until=start + timedelta(seconds=7)))
    assert [t.start_ms for t in inside] == [int((start.timestamp() + s) * 1000) for s in (3, 4, 5, 6)]
    assert len(list(otlp.read(path, limit=4))) == 4
    assert parse_time("24h", start).isoformat() == "2026-11-30T00:00:00+00:00"
    assert parse_time("2026-12-01T06:00:00").isoformat() == "2026-12-01T06:00:00+00:00"


def test_a_file_that_is_not_otlp_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"spans": []}))
    with pytest.raises(DataError, match=r"bad.json.*expected OTLP JSON"):
        list(otlp.read(bad))
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"resourceSpans": []}\n{oops\n')
    with pytest.raises(DataError, match=r"lines.jsonl.*line 2: not JSON"):
        list(otlp.read(lines))


def test_traces_in_sessions_become_conversations(tmp_path):
    """Each trace's history: the root's own earlier messages when it sent them, else its session's
    earlier traces (query, answer), the last data.traces.history of them; sessions beyond the open
    limit are closed and counted."""
    from ragmem.data.conversations import Sessions

    planned = traffic.plan(12, raised=2)  # two sessions, alternating; the first trace of each raised
    records = _records(traffic.write_otlp(tmp_path / "spans.json", planned))
    sessions = Sessions(window=3)
    shaped = [sessions.history(dict(r)) for r in records]
    for i, (p, r) in enumerate(zip(planned, shaped)):
        earlier = [(q, rec) for q, rec in zip(planned[:i], records[:i]) if q.session == p.session][-3:]
        expected = [turn for q, rec in earlier for turn in
                    [{"role": "user", "content": q.query}]
                    + ([{"role": "assistant", "content": q.answer}] if "answer" in rec else [])]
        assert r.get("history", []) == expected, i
    assert sessions.with_history == 10 and sessions.closed_early == 0
    tight = Sessions(window=3, open_sessions=1)
    [tight.history(dict(r)) for r in records]
    assert tight.closed_early == 11  # the two sessions alternate: each turn closes the other
    assert all("history" not in Sessions(window=0).history(dict(r)) for r in records)

    def root(inputs):
        return spans.Trace("tr-m", 0, [spans.Span("r", None, "r", "CHAT_MODEL", 0, 1, "OK", None, inputs, "fine")],
                           session_id="s")

    chat = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "I am Ann."},
                         {"role": "assistant", "content": "Hello Ann."}, {"role": "user", "content": "My name?"}]}
    record = spans.to_record(root(chat), TraceMapping())
    assert record["history"] == chat["messages"][1:3] and record["query"] == "My name?"
    assert Sessions(window=1).history(record)["history"] == chat["messages"][1:3]  # one turn: a user and an assistant
    assert "history" not in spans.to_record(root({"question": "My name?"}), TraceMapping())


def test_a_traces_run_holds_a_thousand_traces_at_once_unless_told(tmp_path, monkeypatch):
    """A trace is a heavy example: unless data.chunk_size is set, a traces run holds 1,000 at once
    (benchmarks/bench_traces.py: a window of 20,000 within 1.2x the memory of 2,000's)."""
    from ragmem.config.loading import resolve_settings
    from ragmem.run import traffic as traffic_data

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    path = traffic.write_otlp(tmp_path / "spans.json", traffic.plan(4, raised=0))
    for given, held in ((None, 1_000), (500, 500), (5_000, 5_000)):
        data = {"traces": {"files": [str(path)]}, **({"chunk_size": given} if given else {})}
        cfg, _ = traffic_data.as_data(resolve_settings(extra={"data": data, "tracking": {"enabled": False}}))
        assert cfg.data.chunk_size == held and len(cfg.data.files) == 1


def _root(start_ns: int, end_ns: int, inputs=None, tokens=None) -> spans.Trace:
    root = spans.Span("r", None, "r", "AGENT", start_ns, end_ns, "OK", None, inputs or {"query": "q?"}, {"answer": "a"},
                      tokens)
    return spans.Trace("tr-x", 0, [root])


@pytest.mark.parametrize("trace, said", [
    (_root(5_000_000_000, 0), "its root span lasts -5000 ms (it ends before it starts, or after a week: a clock step?)"),
    (_root(0, 10**19), "its root span lasts 1e+13 ms"),
    (_root(0, 5, tokens={"input_tokens": "12"}), "its token usage input_tokens = '12' is not a count"),
    (_root(0, 5, tokens={"input_tokens": -3}), "its token usage input_tokens = -3 is not a count"),
    (_root(0, 5, tokens={"total_tokens": 1e30}), "its token usage total_tokens = 1e+30 is not a count"),
    (_root(0, 5, tokens={"total_tokens": float("inf")}), "its token usage total_tokens = inf is not a count"),
], ids=["clock-step", "a-week", "string-tokens", "negative-tokens", "huge-tokens", "infinite-tokens"])
def test_a_trace_whose_times_or_usage_are_not_usable_is_a_named_failure(trace, said):
    """A per-trace problem is that trace's failure (the window goes on), never a refused window: no
    latency, no tokens written for the loader to refuse."""
    record = spans.to_record(trace, TraceMapping())
    assert record["agent_error"].startswith(said) and "answer" not in record
    assert "latency_ms" not in record or record["latency_ms"] >= 0
    assert "tokens" not in record


def test_a_root_without_a_query_key_never_puts_its_inputs_in_the_query():
    record = spans.to_record(_root(0, 5, inputs={"user_password": "hunter2-secret", "n": 1}), TraceMapping())
    assert record["query"] == "(no query: the root's inputs hold user_password, n)"
    assert "hunter2" not in json.dumps(record)


def _otlp(spans_: list, resource=None) -> dict:
    scope = {"scopeSpans": [{"spans": spans_}]}
    return {"resourceSpans": [resource if resource is not None else scope]}


def _span(**more) -> dict:
    return {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "agent", "startTimeUnixNano": "1000",
            "endTimeUnixNano": "2000", "attributes": [{"key": "input.value", "value": {"stringValue": "q?"}}], **more}


def _nested(depth: int) -> str:
    """An OTLP file whose one attribute nests ``depth`` kvlists deep (as text: too deep to dump)."""
    value = '{"kvlistValue": {"values": [{"key": "k", "value": ' * depth + '{"stringValue": "x"}' + "}]}}" * depth
    text = json.dumps(_otlp([_span(attributes=[{"key": "input.value", "value": {"stringValue": "q?"}},
                                              {"key": "deep", "value": "@"}])]))
    return text.replace('"@"', value)


@pytest.mark.parametrize("content, said", [
    (_nested(100), None),  # 400 JSON levels deep: read
    (_nested(5000), "nested deeper than can be read"),
    (_otlp([_span(attributes=[{"key": "n", "value": {"intValue": "9" * 5000}}])]), "span 1: intValue: expected an integer"),
    (_otlp([_span(startTimeUnixNano="yesterday")]),
     "span 1: startTimeUnixNano: expected nanoseconds since 1970, got 'yesterday'"),
    (_otlp([_span(), None]), "span 2: expected a span object, got null"),
    (_otlp([], resource="not a resource"), "resourceSpans: expected objects with scopeSpans, got str"),
    (_otlp([_span(attributes="a string")]), "span 1: attributes: expected a list, got str"),
    ({"resourceSpans": [{"scopeSpans": "spans"}]}, "resourceSpans: expected objects with scopeSpans, got scopeSpans str"),
], ids=["nested-400-deep", "nested-5000-deep", "5000-digit-int", "time-yesterday", "null-span", "resource-a-string", "attributes-a-string",
        "scope-spans-a-string"])
def test_a_malformed_otlp_file_is_one_line_naming_the_file_and_the_span(tmp_path, content, said):
    path = tmp_path / "spans.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    if said is None:  # (read whole: one trace, its record made)
        (trace,) = list(otlp.read(path))
        assert spans.to_record(trace, TraceMapping())["query"] == "q?"
        return
    with pytest.raises(DataError) as caught:
        list(otlp.read(path))
    assert str(caught.value).startswith(f"{path}: ") and said in str(caught.value), str(caught.value)


def test_an_otlp_file_with_a_byte_order_mark_and_an_infinite_double_is_read(tmp_path):
    content = _otlp([_span(attributes=[{"key": "input.value", "value": {"stringValue": "q?"}},
                                       {"key": "llm.token_count.total", "value": {"doubleValue": 1e308 * 10}}])])
    path = tmp_path / "spans.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(content).replace("Infinity", "1e999").encode())
    (trace,) = list(otlp.read(path))
    assert trace.spans[0].tokens in (None, {})  # (1e999 is no count: dropped, not an infinite usage)


def test_an_otlp_file_read_in_chunks_of_seven_bytes_gives_the_same_traces(tmp_path, monkeypatch):
    """The reader's cut points anywhere (inside a string, a number, an escape, a UTF-8 character): the
    same traces as read whole, from a compact file, a pretty-printed one and JSON Lines."""
    from ragmem.data import jsonstream

    planned = traffic.plan(12, raised=2)
    path = traffic.write_otlp(tmp_path / "spans.json", planned)
    whole = [(t.trace_id, t.start_ms, t.spans, t.session_id) for t in otlp.read(path)]
    content = json.loads(path.read_text())
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    lines = tmp_path / "lines.jsonl"  # (one request per resource, as a collector's file exporter writes)
    lines.write_text("".join(json.dumps({"resourceSpans": [r]}) + "\n" for r in content["resourceSpans"]))
    monkeypatch.setattr(jsonstream, "CHUNK", 7)
    for each in (path, pretty, lines):
        assert [(t.trace_id, t.start_ms, t.spans, t.session_id) for t in otlp.read(each)] == whole, each
    assert len(whole) == 12


@pytest.mark.parametrize("text, said", [
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "n": ' + "9" * 5000 + '}]}]}]}',
     "line 1: span 1: Exceeds the limit (4300 digits) for integer string conversion"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "name": "cut', "line 1: not JSON (Unterminated string"),
    ('{"resourceSpans": []}\n{"resourceSpans": []}\n{"resourceSpans": [}\n', "line 3: not JSON (Expecting value)"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "' + "x" * 9000 + '"}]}]}]}',
     "line 1: span 1 is larger than"),
    ('["resourceSpans"]', "line 1: expected OTLP JSON"),
    ('{"resourceSpans": [] "x": 1}', "line 1: not JSON (expected ',' or '}', found '\"')"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff"}]}]}]}', "not UTF-8 text"),
], ids=["5000-digit-number", "cut-short", "bad-third-line", "span-over-the-limit", "an-array", "no-comma", "not-utf8"])
def test_a_malformed_otlp_stream_is_one_line_naming_the_file_and_where(tmp_path, monkeypatch, text, said):
    from ragmem.data import jsonstream

    monkeypatch.setattr(jsonstream, "MAX_VALUE_CHARS", 8192)  # (a span of 9,000 characters: over it)
    monkeypatch.setattr(jsonstream, "CHUNK", 64)
    path = tmp_path / "spans.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(DataError) as caught:
        list(otlp.read(path))
    assert str(caught.value).startswith(f"{path}: ") and said in str(caught.value), str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_otlp_file_whose_texts_escape_half_a_character_pair_is_read_and_those_traces_are_named_failures(
        tmp_path, monkeypatch):
    """An exporter's ``\\ud800`` (half of a UTF-16 pair: no UTF-8 for it) in a span's input or output:
    the run died writing the window's data file (UnicodeEncodeError). Each such trace is now a named
    failure, its texts shown with the half pair escaped; the others are read as they were."""
    import ragmem

    monkeypatch.setenv("RAGMEM_HOME", str(tmp_path / "home"))
    path = traffic.write_otlp(tmp_path / "spans.json", traffic.plan(6, raised=0))
    text = path.read_text()
    assert text.count("(question #0)") >= 2
    path.write_text(text.replace("(question #0)", "(question #0 \\ud800)"))  # the first trace's question, in each span
    result = ragmem.evaluate(config={"metrics": ["pass_rate"], "stats": {"resamples": 50},
                                     "data": {"traces": {"files": [str(path)]}}}, track=False)
    failed = result.table[result.table["error"].notna()]
    assert len(result.table) == 6 and len(failed) == 1
    assert failed["error"].iloc[0] == "a lone surrogate U+D800 in its spans (half of a character pair: not Unicode text)"
    assert "\\ud800" in json.dumps(failed.to_dict("records"), ensure_ascii=False)  # shown, escaped
    assert result.summary["counts"]["n_agent_errors"] == 1
