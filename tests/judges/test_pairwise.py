"""``ragmem compare RUN_A RUN_B --judge pairwise`` against scripted judges on a local
OpenAI-compatible server: position bias measured (swapped orders), the win rate against a share
counted by hand, the cache, the MLflow run linked to both runs, and the refusals before any request."""

import json

import pytest
from mlflow import MlflowClient

import ragmem
from ragmem.judges.pairwise import bootstrap_interval, verdict
from ragmem.prompts.templates import unescape
from tests.openai_stub import Stub, data_block

N = 20


def _records(right: set[int], voice: str = "") -> list[dict]:
    """N examples; the answer states the reference for the ids in ``right`` (``voice``: the run's own
    wording around it, so that no two runs give the same answer)."""
    return [{"id": f"e{i}", "query": f"Where is depot {i}?", "reference_answer": f"Depot {i} is in Porto.",
             "generated_answer": f"{voice}Depot {i} is in Porto." if i in right else f"{voice}Depot {i} might be in Faro."}
            for i in range(N)]


A_RIGHT = {i for i in range(N) if i % 2 == 0}        # A right on the even ids
B_RIGHT = {i for i in range(N) if i % 4 != 3}        # B right on 0,1,2, 4,5,6, ... (15 of 20)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, shared_store):
    folder = tmp_path_factory.mktemp("pairwise")
    ids = []
    for name, right, voice in (("a", A_RIGHT, ""), ("b", B_RIGHT, "I checked: ")):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(_records(right, voice)), encoding="utf-8")
        ids.append(ragmem.evaluate(str(path), experiment="pairwise", tracking=shared_store).run_id)
    return ids


def _set(stub, tmp_path, cache="cache"):
    return ["--set", "judge.type=llm", "--set", "judge.model=judge-test", "--set", f"judge.base_url={stub.base_url}",
            "--set", f"judge.cache_dir={tmp_path / cache}", "--set", "judge.retry_backoff_s=0.01"]


def _first_position(request):
    return {"winner": "1", "reason": "the first one"}


def _holds_reference(request):
    """Prefers the answer that states the reference; a tie when both or neither do."""
    reference = data_block(request, "reference")
    one, two = (reference in data_block(request, f"answer_{k}") for k in (1, 2))
    return {"winner": "1" if one and not two else "2" if two and not one else "tie", "reason": "by the reference"}


def test_a_judge_that_always_prefers_the_first_position_is_all_ties_and_swap_inconsistent(
        runs, shared_store, tmp_path, ragmem_main):
    with Stub(chat=_first_position) as stub:
        done = ragmem_main(["compare", *runs, "--judge", "pairwise", "--tracking-uri", shared_store["uri"],
                            *_set(stub, tmp_path), "-o", str(tmp_path / "p.json")], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert len(stub.requests) == 2 * N  # each example twice, the answers swapped
        orders = {(data_block(r, "answer_1"), data_block(r, "answer_2")) for r in stub.requests}
        assert len(orders) == 2 * N and all((two, one) in orders for one, two in orders)
    result = json.loads((tmp_path / "p.json").read_text())
    assert result["swap_inconsistency"] == 1.0 and result["n_swap_inconsistent"] == N
    assert (result["wins"], result["ties"], result["losses"]) == (0, N, 0)
    assert result["win_rate"] == 0.5 and result["win_rate_ci"] == [0.5, 0.5]
    assert "swap_inconsistency 1.0000: 20 verdicts changed with the order" in " ".join(done.stdout.split())


def test_a_judge_that_prefers_the_reference_gives_the_share_counted_by_hand_and_a_rerun_sends_nothing(
        runs, shared_store, tmp_path, ragmem_main):
    b_only = len(B_RIGHT - A_RIGHT)   # B right, A wrong: B wins
    a_only = len(A_RIGHT - B_RIGHT)   # A right, B wrong: B loses
    by_hand = (b_only + 0.5 * (N - b_only - a_only)) / N
    with Stub(chat=_holds_reference) as stub:
        args = ["compare", *runs, "--judge", "pairwise", "--tracking-uri", shared_store["uri"], *_set(stub, tmp_path)]
        first = ragmem_main([*args, "-o", str(tmp_path / "first.json")], cwd=tmp_path)
        sent = len(stub.requests)
        again = ragmem_main([*args, "-o", str(tmp_path / "again.json")], cwd=tmp_path)
        assert len(stub.requests) == sent == 2 * N  # the rerun: every reply from the cache
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    result, rerun = (json.loads((tmp_path / f).read_text()) for f in ("first.json", "again.json"))
    assert (result["wins"], result["losses"], result["ties"]) == (b_only, a_only, N - b_only - a_only) == (5, 0, 15)
    assert result["win_rate"] == pytest.approx(by_hand, abs=1e-12) and result["swap_inconsistency"] == 0.0
    low, high = result["win_rate_ci"]
    assert low < by_hand < high
    assert result["usage"]["judge_calls"] == 2 * N and rerun["usage"]["judge_calls"] == 0
    assert rerun["usage"]["judge_cache_hits"] == 2 * N and rerun["win_rate"] == result["win_rate"]
    # the comparison is a run of its own, linked to both runs, with every verdict and reason
    client = MlflowClient(shared_store["uri"])
    logged = client.get_run(result["pairwise_run_id"])
    assert logged.data.tags["ragmem.judges.pairwise.run_a"] == runs[0] and logged.data.tags["ragmem.judges.pairwise.run_b"] == runs[1]
    assert logged.data.metrics["win_rate"] == pytest.approx(by_hand) and logged.data.metrics["wins"] == 5
    assert logged.data.metrics["swap_inconsistency"] == 0.0 and logged.data.metrics["usage/judge_calls"] == 2 * N
    assert logged.info.status == "FINISHED" and logged.data.params["judge"] == "pairwise"
    stored = json.loads(open(client.download_artifacts(logged.info.run_id, "pairwise.json", str(tmp_path))).read())
    won = [r for r in stored["rows"] if r["outcome"] == "win"]
    assert sorted(r["id"] for r in won) == sorted(f"e{i}" for i in B_RIGHT - A_RIGHT)
    assert all(r["reason_a_first"] == "by the reference" and r["verdict_a_first"] == "2" for r in won)
    # the report of the two runs shows the examples B won and lost, both answers side by side
    shown = ragmem_main(["report", *runs, "--tracking-uri", shared_store["uri"], "--resamples", "100",
                         "-o", str(tmp_path / "diff.html")], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    page = (tmp_path / "diff.html").read_text(encoding="utf-8")
    assert "B won 5, tied 15, lost 0</h2>" in page and "<h3>B won: 5</h3>" in page and "<h3>B lost: 0</h3>" in page
    assert "I checked: Depot 1 is in Porto." in page and "Depot 1 might be in Faro." in page
    # without --output, a run's report and a diff keep apart: the diff does not replace report.html
    for args in ([runs[0][:8]], [runs[0][:8], runs[1][:8]]):
        done = ragmem_main(["report", *args, "--tracking-uri", shared_store["uri"], "--resamples", "50"], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").is_file() and (tmp_path / f"diff-{runs[0][:8]}-{runs[1][:8]}.html").is_file()
    assert "B won 5" not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_nothing_to_judge_and_a_judge_that_is_not_an_llm_are_one_line_before_any_request(
        runs, shared_store, tmp_path, ragmem_main):
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{**r, "id": f"x{i}"} for i, r in enumerate(_records(set()))]), encoding="utf-8")
    unrelated = ragmem.evaluate(str(other), experiment="pairwise", tracking=shared_store).run_id
    with Stub(chat=_first_position) as stub:
        done = ragmem_main(["compare", runs[0], unrelated, "--judge", "pairwise", "--tracking-uri",
                            shared_store["uri"], *_set(stub, tmp_path)], cwd=tmp_path)
        offline = ragmem_main(["compare", *runs, "--judge", "pairwise", "--tracking-uri", shared_store["uri"]],
                              cwd=tmp_path)
        unknown = ragmem_main(["compare", *runs, "--judge", "pairwise", "--rubric", "tone", "--tracking-uri",
                               shared_store["uri"], *_set(stub, tmp_path)], cwd=tmp_path)
        assert stub.requests == [] and stub.gets == []
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"error: compare --judge pairwise: runs {runs[0]} and {unrelated} share no example ids: nothing to judge"]
    assert offline.returncode == 2 and offline.stderr.strip().startswith("error: compare --judge pairwise: needs an LLM judge")
    assert unknown.returncode == 2 and "--rubric tone: not a rubric of the config (rubrics: none)" in unknown.stderr


def test_a_rubric_is_the_pairwise_criterion(runs, shared_store, tmp_path, ragmem_main):
    config = tmp_path / "judge.yaml"
    config.write_text("judge: {type: llm, model: judge-test}\nrubrics:\n  brief: {criteria: The answer is short.,"
                      " scale: 1-5, inputs: [answer], steps: [Count the words.]}\n", encoding="utf-8")
    with Stub(chat=_holds_reference) as stub:
        done = ragmem_main(["compare", *runs, "--judge", "pairwise", "--rubric", "brief", "-c", str(config),
                            "--tracking-uri", shared_store["uri"], "--set", f"judge.base_url={stub.base_url}",
                            "--set", f"judge.cache_dir={tmp_path / 'c'}"], cwd=tmp_path)
        text = unescape(stub.requests[0]["messages"][1]["content"])
    assert done.returncode == 0, done.stderr
    assert "Which answer better meets these criteria: The answer is short. Steps: (1) Count the words." in text


def test_the_verdict_of_two_orders_and_the_interval():
    assert verdict({"winner": "2"}, {"winner": "2"}) == ("tie", True)   # the second position both times
    assert verdict({"winner": "1"}, {"winner": "2"}) == ("loss", False)  # A both times
    assert verdict({"winner": "tie"}, {"winner": "1"}) == ("tie", True)  # a winner one way, a tie the other
    assert bootstrap_interval([], 100, 0, 0.95) is None
    low, high = bootstrap_interval([1.0] * 30 + [0.0] * 10, 2000, 0, 0.95)
    assert low < 0.75 < high and high - low < 0.35


CHANGED = {1, 3, 5, 7}  # A is wrong on the odd ids; a run that answers as A but right on these four


def _against_same_but_four(runs, shared_store, tmp_path, ragmem_main, chat, trailing=""):
    """Run A against a run that answers as A on 16 of 20 examples (the 4 of :data:`CHANGED` right), with
    the judge ``chat``: the command's output and its JSON; only the 4 differing pairs were sent, both orders."""
    records = [{**r, "generated_answer": (f"Depot {i} is in Porto." if i in CHANGED else r["generated_answer"]) + trailing}
               for i, r in enumerate(_records(A_RIGHT))]
    path = tmp_path / "same.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    same = ragmem.evaluate(str(path), experiment="pairwise", tracking=shared_store).run_id
    with Stub(chat=chat) as stub:
        done = ragmem_main(["compare", runs[0], same, "--judge", "pairwise", "--tracking-uri", shared_store["uri"],
                            *_set(stub, tmp_path), "-o", str(tmp_path / "p.json")], cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert len(stub.requests) == 2 * len(CHANGED)
    return done, json.loads((tmp_path / "p.json").read_text())


def test_position_bias_is_measured_on_the_pairs_the_judge_saw(runs, shared_store, tmp_path, ragmem_main):
    """A judge that always picks the first position, on two runs whose answers are identical on 16 of
    20 examples: the 4 pairs asked all changed with the order, so swap_inconsistency is 1.0 (the
    judge's bias as it is), not 4 / 20 diluted by pairs it never saw."""
    done, result = _against_same_but_four(runs, shared_store, tmp_path, ragmem_main, _first_position)
    assert (result["n_asked"], result["n_swap_inconsistent"], result["swap_inconsistency"]) == (4, 4, 1.0)
    assert result["n_identical"] == 16 and result["n_judged"] == N
    assert "swap_inconsistency 1.0000: 4 verdicts changed with the order (of 4 asked;" in " ".join(done.stdout.split())


def test_identical_answers_are_ties_without_a_request(runs, shared_store, tmp_path, ragmem_main):
    """A run that answers as A on 16 of 20 examples (as a setting the answers do not depend on gives):
    those 16 are ties, counted as identical, and only the 4 others are sent to the judge."""
    # (trailing whitespace: still the same answer)
    done, result = _against_same_but_four(runs, shared_store, tmp_path, ragmem_main, _holds_reference, trailing="  ")
    assert (result["wins"], result["ties"], result["losses"]) == (4, 16, 0) and result["n_identical"] == 16
    assert result["win_rate"] == pytest.approx((4 + 0.5 * 16) / N) and result["n_judged"] == N
    assert "16 of the ties: identical answers, not sent to the judge" in " ".join(done.stdout.split())
