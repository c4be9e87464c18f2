"""Keyword extraction: Chinese is segmented, English words and numbers stay whole."""

import pytest

from ragmem.errors import ConfigError
from ragmem.judges.keyword import KeywordJudge
from ragmem.text.keywords import KeywordExtractor, normalize

K = KeywordExtractor()

# (text, expected keyword set)
KEYWORD_CASES = [
    ("RAG系统依赖向量检索", {"rag", "系统", "依赖", "向量", "检索"}),
    ("向量数据库如Qdrant用于存储embedding", {"向量", "数据库", "qdrant", "用于", "存储", "embedding"}),
    ("The retriever returns the top 5 chunks.", {"retriever", "returns", "top", "5", "chunks"}),
    ("ＲＡＧ２ uses GPT-4o, 3.5 s", {"rag2", "uses", "gpt", "4o", "3.5", "s"}),  # NFKC folds full width
    ("的 是 什么 the of is", set()),  # only stopwords
    ("", set()),
    ("？！，。", set()),  # punctuation only
]


@pytest.mark.parametrize("text, expected", KEYWORD_CASES)
def test_keywords(text, expected):
    assert set(K(text)) == expected


def test_the_original_regex_problem_is_gone():
    # `\b\w+\b` saw this whole sentence as one "word"; segmentation yields the words.
    assert len(K("短期记忆中存储最近对话内容")) >= 4


def test_normalize_is_nfkc_lowercase():
    assert normalize("ＡＢＣ１２３ Ｑｄｒａｎｔ") == "abc123 qdrant"


# Overlap = |K(ref) ∩ K(gen)| / |K(ref)|, hand-computed.
OVERLAP_CASES = [
    # Chinese answer that reorders the reference's words: every keyword shared.
    ("向量数据库用于存储embedding", "embedding存储用于向量数据库", 1.0),
    # Chinese answer sharing no word with the reference.
    ("长期记忆保存用户偏好", "重排序提高检索质量", 0.0),
    # K(ref) = {短期, 记忆, 保存, 最近, 对话}; K(gen) = {短期, 记忆, 保存, 用户, 偏好} -> 3/5
    ("短期记忆保存最近对话", "短期记忆保存用户偏好", 3 / 5),
    # English: K(ref) = {reranker, rescores, retrieved, candidates}; gen shares reranker, candidates -> 2/4
    ("The reranker rescores retrieved candidates", "A reranker sorts candidates", 2 / 4),
    ("The reranker rescores retrieved candidates", "candidates retrieved rescores reranker", 1.0),
]


@pytest.mark.parametrize("reference, generated, expected", OVERLAP_CASES)
def test_overlap(reference, generated, expected):
    value, undefined = KeywordJudge(K).overlap(reference, generated)
    assert value == pytest.approx(expected) and not undefined


def test_verdict_is_strictly_above_threshold():
    judge = KeywordJudge(K, threshold=0.6)
    # overlap exactly 0.6 (3/5) is not > 0.6
    from ragmem.judges import JudgeItem

    (j,) = judge.judge([JudgeItem("q", "短期记忆保存用户偏好", "短期记忆保存最近对话")])
    assert j.verdict == 0 and j.score == pytest.approx(0.6)


def test_empty_reference_follows_zero_division():
    from ragmem.judges import JudgeItem

    item = JudgeItem("q", "anything", "的")
    assert KeywordJudge(K, zero_division=0.0).judge([item])[0].verdict == 0
    nan_judge = KeywordJudge(K, zero_division=float("nan"))
    (j,) = nan_judge.judge([item])
    assert j.verdict is None and "no keywords" in j.error and nan_judge.n_undefined == 1


def test_char_tokenizer_and_signature():
    C = KeywordExtractor(tokenizer="char", stopwords=[])
    assert set(C("向量abc")) == {"向", "量", "abc"}
    assert C.signature().startswith("tok:char|sw:none")
    assert "jieba-" in K.signature() and "stopwords-iso" in K.signature()


@pytest.mark.parametrize("kwargs, message", [
    ({"tokenizer": "nope"}, "keywords.tokenizer"),
    ({"stopwords": ["martian:xx"]}, "keywords.stopwords"),
    ({"stopwords": ["stopwords-iso:xx"]}, "no language"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        KeywordExtractor(**kwargs)


def test_the_keyword_cache_is_bounded_least_recently_used_first_and_counts_its_hits():
    from ragmem.text.keywords import KeywordExtractor

    K, fresh = KeywordExtractor("char", [], cache_size=3), KeywordExtractor("char", [])
    assert K.hit_rate() is None
    K.prime(["ab", "cd", "ef"])                      # 3 segmented
    assert K("ab") == fresh("ab")                    # a hit; "ab" is the most recent now
    K.prime(["gh"])                                  # "cd", the least recently used, goes
    assert list(K._known) == ["ef", "ab", "gh"]
    assert K("cd") == fresh("cd")                    # segmented again (a miss), "ef" goes
    assert list(K._known) == ["ab", "gh", "cd"] and len(K._known) == K.cache_size
    assert (K.hits, K.misses) == (1, 5) and K.hit_rate() == 1 / 6
    assert K.union(["ab", "zz"]) == fresh("ab") | fresh("zz")  # the sets are the same, cached or not


def test_after_a_chunk_the_texts_seen_once_leave_the_cache_and_those_that_repeat_stay():
    """A streamed run settles its keyword cache after each chunk: on data whose texts do not repeat
    it holds one chunk's texts, not keywords.cache_size of them (issue 57: 30k fresh examples held
    210,000 texts' sets); a text that repeats, in the chunk or in a later one, is kept."""
    from ragmem.text.keywords import KeywordExtractor

    K, fresh = KeywordExtractor("char", []), KeywordExtractor("char", [])
    K.prime(["ref", "answer"], counted=False)       # a batch's references and answers, for the judge
    K.prime(["ref", "answer", "ctx-a", "ctx-b", "ctx-a"])  # the chunk's texts: ctx-a occurs twice
    K.settle()
    assert list(K._known) == ["ctx-a"]              # the once-seen texts forgotten, the repeated one kept
    K.prime(["late"], counted=False)                # the next chunk's batch, primed before its chunk is scored
    K.prime(["ref", "late", "new"])                 # "ref" again, in a later chunk: segmented once more ...
    K.settle()
    assert set(K._known) == {"ctx-a", "ref"}        # ... and kept from then on; "late" and "new" occurred once
    assert K("ref") == fresh("ref") and K("answer") == fresh("answer")  # the sets are the same, kept or not
    K.prime(["x"])
    K.settle()
    K.prime(["y"])
    K.settle()
    assert "x" not in K._known and len(K._once) <= K.cache_size


def test_a_text_asked_for_unprimed_once_leaves_the_cache_at_settle():
    """Issue 57: a set computed on a miss (a query no prime saw) is an occurrence for settle, not a
    resident to the cache's end."""
    K, fresh = KeywordExtractor("rjieba", []), KeywordExtractor("rjieba", [])
    K.prime(["检索系统 alpha", "检索系统 beta"])
    assert K("a query no prime saw") == fresh("a query no prime saw")
    K.settle()
    assert "a query no prime saw" not in K._known


def test_kept_sets_are_one_string_each_and_give_the_same_keywords():
    """Issue 57: a kept keyword set is its words joined by a space, one string (on fresh words,
    letting go of the kept sets freed 114 MB of a 10k run's heap as tuples, 19 MB packed); what a
    metric asks for is the set as computed: primed, computed on a miss, in a union. A word with a
    space in it (no tokenizer of ragmem's makes one) leaves its set a tuple; an empty set is the empty string."""
    from ragmem.text.keywords import pack, unpack

    K, fresh = KeywordExtractor("rjieba", []), KeywordExtractor("rjieba", [])
    texts = ["检索系统 alpha", "RAG系统依赖向量检索，召回率 0.85", "", "the The THE"]
    K.prime(texts[:2])
    K("the The THE")
    assert all(isinstance(K._known[t], str) for t in texts[:2]) and K._known["the The THE"] == "the"
    assert [K(t) for t in texts] == [fresh(t) for t in texts] and K._known[""] == ""
    assert K.union(texts) == fresh.union(texts) == frozenset().union(*map(fresh, texts))
    assert pack(("a b", "c")) == ("a b", "c") and unpack(pack(("a b", "c"))) == ("a b", "c")
    assert pack(()) == "" and unpack("") == () and sorted(unpack(pack(frozenset("xyz")))) == ["x", "y", "z"]


def test_a_text_that_occurs_twice_in_one_example_is_counted_once():
    """An answer that is its reference occurs once for the cache's settle: it does not repeat."""
    from ragmem.run.pipeline import prime_keywords
    from ragmem.schema import AgentOutput, Context, Example

    K = KeywordExtractor("char", [])
    examples = [Example(id="a", query="q", reference_answer="same"), Example(id="b", query="q", reference_answer="r")]
    outputs = [AgentOutput("a", "same", [Context(text="shared")], 0.1),
               AgentOutput("b", "x", [Context(text="shared")], 0.1)]
    prime_keywords(examples, outputs, K)
    assert K._uses["same"] == 1 and K._uses["shared"] == 2
    K.settle()
    assert list(K._known) == ["shared"]  # the context two examples retrieved stays; "same" does not


def test_forget_lets_go_of_every_set_and_keeps_the_counts():
    """A held run's keyword sets are not asked for once its metrics are computed: ``forget`` lets
    them go before the intervals' arrays are made (issue 57: 17 MB of the 10k run's peak in one
    process), the hit and miss counts stay for the summary, and a set asked for later is the same."""
    K, fresh = KeywordExtractor("char", []), KeywordExtractor("char", [])
    K.prime(["ab", "cd", "ab"])
    assert K("ab") == fresh("ab")
    counts = (K.hits, K.misses)
    K.forget()
    assert not K._known and not K._uses and not K._once
    assert (K.hits, K.misses) == counts
    assert K("cd") == fresh("cd") and K.misses == counts[1] + 1  # segmented again


def test_a_held_run_lets_go_of_its_keyword_sets_once_scored():
    from ragmem.run import pipeline, prepare
    from tests.conftest import ROOT

    cfg = prepare.resolve(ROOT / "configs" / "demo.yaml", extra={"tracking": {"enabled": False}})
    components = pipeline.build_components(cfg)
    examples = pipeline.load(cfg).examples
    outputs = pipeline.time_agent(components.agent, examples, cfg)
    judgements = pipeline.judge(components.judge, examples, outputs)
    pipeline.prime_keywords(examples, outputs, components.keywords)
    assert components.keywords._known
    table = pipeline.build_table(examples, outputs, judgements, components.keywords)
    _, result = pipeline.score(table, cfg, components)
    assert not components.keywords._known and result.values["faithfulness"] is not None
    assert components.keywords.hit_rate() is not None
