"""Writes sweep_corpus.json and sweep_eval.json: the reference corpus and questions (build_reference.py)
plus documents and questions on which the retrievers of configs/sweep_retriever.yaml really differ.
Run it (importing it writes nothing):
    python ragmem/datasets/build_sweep.py

Each added question shares two words with its document: a common topic word (latency, memory, ...)
and one rarer word. Beside the documents stand *tag pages*: a topic word, then the same word once
for each page tagged with it (as a site's tag pages list them). BM25 saturates term frequency (k1) and
normalises by length (b), so the rarer word decides and the document ranks first; TF-IDF's cosine
rewards a text made mostly of the topic word, so the tag page's chunks come first. Reciprocal rank
fusion (hybrid) sits between the two. What the sweep then measures (docs/sweeps.md) is a decision
between retrievers, not a tie broken by the cheapest setting.
"""
import json
from pathlib import Path

HERE = Path(__file__).parent  # the files are written beside this script, wherever it is run from

TOPICS = {  # the topic words, each with a tag page
    "en": ["Latency", "Memory", "Embedding", "Chunking", "Reranking", "Retrieval"],
    "zh": ["延迟", "记忆", "嵌入", "分块", "重排序", "检索"],
}
# (id, title, text, question): the question holds the topic word and one rarer word of the text
ADDED = [
 ("en-13", "Voice assistants", "Voice assistants keep latency under eighty milliseconds so that speech can start at once.",
  "How much latency can voice assistants afford?"),
 ("en-14", "Batching on a GPU", "Filling a GPU batch adds latency; a flush timeout of ten milliseconds caps the wait.",
  "What caps the latency that filling a batch adds?"),
 ("en-15", "Episodic memory", "Episodic memory stores whole past episodes with their dates, so an agent can tell when something happened.",
  "Which memory keeps whole episodes?"),
 ("en-16", "Consolidation", "Consolidation summarises old conversations into compact facts every night, keeping the memory store small.",
  "How does nightly consolidation change the memory?"),
 ("en-17", "Matryoshka embeddings", "A Matryoshka embedding can be truncated to its first 256 dimensions with little loss of quality.",
  "Can a Matryoshka embedding be truncated?"),
 ("en-18", "Model upgrades", "After an upgrade of the embedding model, every stored vector must be computed again.",
  "What does an embedding upgrade require?"),
 ("en-19", "Semantic chunking", "Semantic chunking cuts a document where the topic changes, seen as a drop in similarity between sentences.",
  "Where does semantic chunking cut?"),
 ("en-20", "Parent documents", "Chunking for parent-document search indexes small passages but returns the whole section around them.",
  "With parent-document chunking, what is returned?"),
 ("en-21", "Listwise reranking", "Listwise reranking asks a language model to order all candidates in one request.",
  "How does listwise reranking order candidates?"),
 ("en-22", "Reranking cost", "Reranking a hundred candidates with a cross-encoder costs about as much as one short generation.",
  "What does reranking a hundred candidates cost?"),
 ("en-23", "Query expansion", "Query expansion adds synonyms before retrieval, which helps when users and documents word things differently.",
  "How does query expansion help retrieval?"),
 ("en-24", "Multi-hop retrieval", "Multi-hop retrieval answers in steps: what the first search found writes the second query.",
  "How does multi-hop retrieval proceed?"),
 ("zh-13", "语音助手", "语音助手要把延迟控制在八十毫秒以内，语音才能立刻开始播放。", "语音助手能接受多少延迟？"),
 ("zh-14", "批处理", "凑满一个显卡批次会增加延迟，十毫秒的刷新超时限制了等待。", "什么限制了凑批次带来的延迟？"),
 ("zh-15", "情景记忆", "情景记忆保存完整的过往情节和日期，智能体因此能说出事情发生的时间。", "哪种记忆保存完整的情节？"),
 ("zh-16", "记忆整合", "整合在每天夜里把旧对话总结成简短事实，让记忆库保持精简。", "夜间整合如何改变记忆？"),
 ("zh-17", "套娃嵌入", "套娃嵌入可以截断到前256维而质量损失很小。", "套娃嵌入可以截断吗？"),
 ("zh-18", "模型升级", "嵌入模型升级之后，所有已存的向量都必须重新计算。", "嵌入升级之后需要做什么？"),
 ("zh-19", "语义分块", "语义分块在话题转换的地方切开文档，依据是相邻句子相似度的下降。", "语义分块在哪里切开？"),
 ("zh-20", "父文档", "面向父文档的分块索引小段落，但返回它们所在的整个章节。", "父文档分块返回什么？"),
 ("zh-21", "列表式重排序", "列表式重排序让语言模型在一次请求中给全部候选排好顺序。", "列表式重排序怎样排候选？"),
 ("zh-22", "重排序成本", "用交叉编码器对一百个候选重排序，花费大约等于一次简短生成。", "对一百个候选重排序要花多少？"),
 ("zh-23", "查询扩展", "查询扩展在检索之前加入同义词，在用户和文档措辞不同时有帮助。", "查询扩展如何帮助检索？"),
 ("zh-24", "多跳检索", "多跳检索分步回答：第一次搜索找到的内容用来写第二次查询。", "多跳检索如何进行？"),
]


def main() -> None:
    corpus = json.loads((HERE / "reference_corpus.json").read_text(encoding="utf-8"))
    examples = json.loads((HERE / "reference_eval.json").read_text(encoding="utf-8"))
    for doc_id, title, text, _ in ADDED:
        corpus["documents"].append({"id": doc_id, "title": title, "text": text, "lang": doc_id[:2]})
    for lang, topics in TOPICS.items():
        for i, shown in enumerate(topics):  # a tag page: the topic word, then each page tagged with it
            tags = ("、" if lang == "zh" else ", ").join([shown] * 16)
            text = f"{shown}：{tags}。" if lang == "zh" else f"Tagged {shown.lower()}: {tags.lower()}."
            corpus["documents"].append({"id": f"{lang}-tags-{i + 1}", "title": f"{shown} tags", "text": text, "lang": lang})
    for doc_id, _, text, question in ADDED:
        examples.append({"id": f"q-{doc_id}", "query": question, "reference_answer": text, "label": 1,
                         "relevant_context_ids": [doc_id], "session_id": "u-zh" if doc_id.startswith("zh") else "u-en"})
    (HERE / "sweep_corpus.json").write_text(json.dumps(corpus, ensure_ascii=False, indent=1), encoding="utf-8")
    (HERE / "sweep_eval.json").write_text(json.dumps(examples, ensure_ascii=False, indent=1), encoding="utf-8")
    print(len(corpus["documents"]), len(examples))


if __name__ == "__main__":
    main()
