"""LLM-written questions (``ragmem generate`` without ``--offline``, issue 45): the plan (quotas,
chunks sampled evenly, two chunks linked by their shared terms), the checks' pure parts, and the
writer over the scripted endpoint of tests.testsets.scripted, in this process (a well-behaved fake
client that builds each request as the real one does): the mix is met and each planted document is
dropped by the check planted to fail it. The same against a real HTTP endpoint, the rerun and the
resume after Ctrl+C: tests/e2e/test_generate.py."""

from __future__ import annotations

import collections

import pytest

from ragmem.clients.replies import Result
from ragmem.config.generate_settings import GenerateSettings
from ragmem.prompts import generation
from ragmem.prompts.contracts import contract_of
from ragmem.testsets import checks, documents, plan, probes, records
from ragmem.testsets.probes import distinctive
from ragmem.testsets.writing import Writer
from ragmem.text.keywords import KeywordExtractor
from tests.conftest import ROOT
from tests.testsets import scripted

KEYWORDS = KeywordExtractor("rjieba")
MIX = {"single_hop": 0.5, "multi_hop": 0.15, "comparison": 0.1, "unanswerable": 0.25}


class InProcess:
    """The scripted endpoint called in this process: each request's messages built by its contract,
    the reply validated by it (an invalid one is a failure, as after the real client's repair)."""

    def __init__(self):
        self.asked: list[str] = []

    def run(self, requests):
        out = []
        for task, fields in requests:
            contract = contract_of(task)
            messages = contract.messages(fields)
            self.asked.append(task)
            value = scripted.chat({"messages": messages})
            problem = contract.validate(value)
            out.append(Result(error=f"invalid reply: {problem}") if problem else Result(value))
        return out


def test_quotas_meet_n_and_two_chunks_are_linked_by_their_shared_terms():
    assert plan.quotas(20, MIX) == {"single_hop": 10, "multi_hop": 3, "comparison": 2, "unanswerable": 5}
    for n in (1, 7, 99, 100, 1001):
        assert sum(plan.quotas(n, MIX).values()) == n
    assert plan.quotas(3, {"single_hop": 1.0}) == {"single_hop": 3}
    read = documents.read_corpus(ROOT / "ragmem" / "datasets" / "reference_corpus.json")
    terms = distinctive(read.chunks, KEYWORDS)
    streams = plan.streams(read.chunks, terms, ["single_hop", "multi_hop", "comparison"], seed=3)
    singles = [c.chunks[0].doc_id for c in streams["single_hop"]]
    assert len(singles) == len(read.chunks) and set(singles[:len(read.documents)]) == {d.id for d in read.documents}
    pairs = list(streams["multi_hop"])
    assert pairs and len({frozenset(c.chunks) for c in pairs}) == len(pairs)  # a pair once per type
    for candidate in pairs:
        one, two = candidate.chunks
        assert candidate.link and all(t in terms[read.chunks.index(one)][:probes.TOP] and
                                      t in terms[read.chunks.index(two)][:probes.TOP] for t in candidate.link)
        assert one.doc_id != two.doc_id or abs(read.chunks.index(one) - read.chunks.index(two)) > 1
    again = plan.streams(read.chunks, terms, ["multi_hop"], seed=3)["multi_hop"]
    assert [c.key for c in again] == [c.key for c in pairs]  # the same seed, the same candidates (a rerun's requests)


def test_the_checks_pure_parts():
    assert checks.jaccard(frozenset("ab"), frozenset("bc")) == pytest.approx(1 / 3)
    assert checks.jaccard(frozenset(), frozenset()) == 0.0
    seen = checks.Duplicates(KEYWORDS, 0.8)
    seen.keep("How does Zorblat cache query plans?")
    assert seen.of("How does Zorblat cache its query plans?")[1] == 1.0  # stopwords aside, the same words
    assert seen.of("How does Quillon index documents?") is None
    assert checks.grounded_share("ten thousand plans", ["Its cache holds ten thousand plans."], KEYWORDS) == 1.0
    assert checks.grounded_share("purple elephants", ["Its cache holds plans."], KEYWORDS) == 0.0
    assert checks.grounded_share("the", ["x"], KEYWORDS) is None  # no keyword: the judge decides
    assert checks.same_language("知源做什么？", "知源系统每天夜里重建索引。") and not checks.same_language("What?", "知源系统")
    assert generation.validate("written", {"question": "Q?", "answer": "A"}) is None
    assert generation.validate("attempt", {"answerable": 2, "answer": ""}).startswith("'answerable' must be 0 or 1")


def test_the_mix_is_met_and_each_planted_document_is_dropped_by_its_check(tmp_path):
    read = documents.read_corpus(scripted.write_corpus(tmp_path / "docs"))
    settings = GenerateSettings(n=20, mix=MIX, oversample=4.0)
    client = InProcess()
    generated = Writer(client, read.chunks, KEYWORDS, settings, seed=0).run(plan.quotas(20, MIX))
    assert collections.Counter(w.candidate.type for w in generated.kept) == plan.quotas(20, MIX)  # the mix, met
    single = {w.candidate.chunks[0].doc_id: w for w in generated.dropped if w.candidate.type == "single_hop"}
    assert single["lang.txt"].dropped == "language" and single["ground.txt"].dropped == "grounded"
    assert single["unans.txt"].dropped == "answerable" and single["dup2.txt"].dropped == "duplicate"
    assert single["self.txt"].dropped == "standalone" and "('the passage')" in single["self.txt"].detail
    assert "1.00 token overlap with a kept question" in single["dup2.txt"].detail
    trap = [w for w in generated.dropped if w.candidate.type == "unanswerable" and w.candidate.chunks[0].doc_id == "trap.txt"]
    assert trap[0].dropped == "answerable" and "answer it: 1999" in trap[0].detail
    kept_docs = {c.doc_id for w in generated.kept for c in w.candidate.chunks}
    written_from = {w.candidate.chunks[0].doc_id for w in generated.kept if w.candidate.type != "unanswerable"}
    assert not {"lang.txt", "ground.txt", "unans.txt", "dup2.txt", "self.txt"} & written_from  # (an unanswerable one ignores the plants)
    assert "dup1.txt" in kept_docs  # the first of the two duplicates is kept
    counts = generated.counts()
    assert counts["language"] >= 1 and counts["standalone"] >= 1 and counts["grounded"] >= 1 and counts["duplicate"] >= 1 and counts["answerable"] >= 2
    assert "failed" not in counts  # the scripted endpoint never fails
    for w in generated.kept:  # every kept question passed every check it was given
        assert set(w.checks) == ({"language", "standalone", "duplicate", "answerable"} | ({"grounded"} if w.candidate.type != "unanswerable"
                                                                            else set()))
        assert all(v.startswith("pass") for v in w.checks.values())
    rows = records.kept_records(generated, {}, model="m", endpoint="e", seed=0, chunking="200/40", keywords="k")
    unanswerable = [r for r in rows if r["question_type"] == "unanswerable"]
    assert all(r["reference_answer"] in ("The documents do not say.", "文档中没有提及。") and
               "relevant_context_ids" not in r for r in unanswerable)
    assert all(r["relevant_context_ids"] and r["reference_contexts"] for r in rows if r["question_type"] != "unanswerable")
    lines = records.survival(generated, settings.checks)
    assert lines[0] == f"written: {len(generated.kept) + len(generated.dropped)} of " \
                       f"{len(generated.kept) + len(generated.dropped)} candidates"
    assert "language: " in lines[1] and f"{counts['language']} dropped" in lines[1]
    again = InProcess()
    second = Writer(again, read.chunks, KEYWORDS, settings, seed=0).run(plan.quotas(20, MIX))
    assert [w.question for w in second.kept] == [w.question for w in generated.kept] and again.asked == client.asked


def test_checks_left_out_are_not_asked_and_a_failed_request_is_recorded_per_chunk(tmp_path):
    read = documents.read_corpus(scripted.write_corpus(tmp_path / "docs"))

    class Failing(InProcess):
        def run(self, requests):
            out = super().run(requests)
            return [Result(error="HTTP 500 after 4 retries") if t == "write_single_hop" and "Zorblat" in f["passage"] else r
                    for (t, f), r in zip(requests, out)]

    client = Failing()
    settings = GenerateSettings(n=8, mix={"single_hop": 1.0}, oversample=3.0, checks=["language", "duplicate"])
    generated = Writer(client, read.chunks, KEYWORDS, settings, seed=0).run(plan.quotas(8, settings.mix))
    assert set(client.asked) == {"write_single_hop"}  # no check request: grounded and answerable are off
    failed = [w for w in generated.dropped if w.dropped == "failed"]
    assert [w.candidate.chunks[0].id for w in failed] == ["alpha.txt#c0"]
    assert failed[0].detail == "writing the question: HTTP 500 after 4 retries"
    assert len(generated.kept) == 8 and all(set(w.checks) == {"language", "duplicate"} for w in generated.kept)


def test_a_dry_run_counts_the_first_round_and_its_cost_and_sends_nothing(tmp_path, ragmem_main):
    corpus = scripted.write_corpus(tmp_path / "docs")
    judge = ["--set", "judge.type=llm", "--set", "judge.model=m", "--set", "judge.base_url=http://127.0.0.1:9/v1",
             "--set", f"judge.cache_dir={tmp_path / 'cache'}"]
    done = ragmem_main(["generate", str(corpus), "--n", "20", "--dry-run", *judge, "--set",
                        "judge.prices={m: {input: 1.0, output: 2.0}}"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # (the endpoint is dead: nothing was sent, nothing probed)
    text = " ".join(done.stdout.split())
    assert "asked: 20 questions: 10 single_hop, 4 multi_hop, 3 comparison, 3 unanswerable (generate.mix)" in text
    # 15 + 6 + 5 (4.5 rounded up) + 5 writes; checks at most 3 for an answerable question, 1 for an unanswerable one
    assert "dry run: first round: 31 write requests (0 cached), at most 83 check requests" in text
    assert "cost at most $0." in text and not (tmp_path / "testset.jsonl").exists()
    assert not (tmp_path / ".testset.jsonl.generate.json").exists()
    config = tmp_path / "gen.yaml"  # the documents named by the config (relative: against its folder)
    config.write_text("generate: {corpus: docs, n: 4, mix: {single_hop: 1.0}}\n", encoding="utf-8")
    again = ragmem_main(["generate", "--config", str(config), "--dry-run", *judge], cwd=tmp_path / "docs")
    assert again.returncode == 0 and "first round: 6 write requests (0 cached), at most 18 check" in \
        " ".join(again.stdout.split())
    for flag in ("--dry-run", "--resume"):
        offline = ragmem_main(["generate", str(corpus), "--offline", flag], cwd=tmp_path)
        assert offline.returncode == 2 and offline.stderr.strip() == \
            f"error: {flag}: an offline generate sends no request (leave out {flag})"
    none = ragmem_main(["generate", "--dry-run", *judge], cwd=tmp_path)
    assert none.returncode == 2 and none.stderr.strip() == \
        "error: generate: name the documents (ragmem generate FOLDER ...) or set generate.corpus"


def test_resume_is_refused_without_an_interrupted_run_or_with_other_settings(tmp_path):
    from ragmem.errors import RagmemError
    from ragmem.testsets import session

    state = session.State(tmp_path / "t.jsonl")
    wanted = {"chunks_sha256": "a" * 64, "n": 20, "seed": 0}
    with pytest.raises(RagmemError, match=r"--resume: no interrupted generate of .*t.jsonl \(no .t.jsonl.generate.json"):
        state.check(wanted, resume=True)
    assert state.check(wanted, resume=False) is None
    state.begin(wanted)
    assert state.check(wanted, resume=True).startswith("resuming the interrupted generate of")
    assert "was found: its replies are reused" in state.check(wanted, resume=False)
    with pytest.raises(RagmemError, match=r"--resume: n changed since the interrupted generate .* \(20 then, 30 now\)"):
        state.check({**wanted, "n": 30}, resume=True)
    with pytest.raises(RagmemError, match=r"--resume: the documents changed since"):
        state.check({**wanted, "chunks_sha256": "b" * 64}, resume=True)
    state.end()
    assert state.found() is None
