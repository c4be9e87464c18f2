"""Writes reference_corpus.json and reference_eval.json (text written for ragmem). Run it (importing it writes nothing):
    python ragmem/datasets/build_reference.py
"""
import json
from pathlib import Path

HERE = Path(__file__).parent  # the files are written beside this script, wherever it is run from
DOCS = {
 "zh-01": ("检索增强生成", ["检索增强生成先从知识库中检索相关文档。", "检索到的文档与用户问题一起作为提示交给大模型。", "这种做法让回答有据可查并减少幻觉。", "知识库更新后无需重新训练模型。"]),
 "zh-02": ("向量数据库", ["向量数据库存储文本的嵌入向量。", "它使用近似最近邻索引加速相似度搜索。", "常见的向量数据库有Qdrant、Milvus和FAISS。", "向量数据库也可以保存元数据用于过滤。"]),
 "zh-03": ("BM25算法", ["BM25是一种基于词频和逆文档频率的稀疏检索算法。", "参数k1控制词频饱和的速度。", "参数b控制文档长度归一化的强度。", "中文使用BM25之前需要先分词。"]),
 "zh-04": ("重排序", ["重排序模型对初步检索的候选文档重新打分。", "交叉编码器同时读取问题和文档因此更准确。", "重排序会增加额外的延迟。", "通常只对前几十个候选做重排序。"]),
 "zh-05": ("文本分块", ["文本分块把长文档切成较短的片段。", "分块太大会引入无关内容。", "分块太小会丢失上下文。", "相邻分块之间保留重叠可以避免句子被切断。"]),
 "zh-06": ("短期记忆", ["短期记忆保存当前会话最近几轮对话。", "记忆窗口决定保留多少轮对话。", "窗口太小会忘记用户刚说过的话。", "窗口太大会占用上下文长度并增加成本。"]),
 "zh-07": ("长期记忆", ["长期记忆保存用户跨会话的偏好和事实。", "长期记忆通常存放在向量库中按需检索。", "写入长期记忆前需要去重和合并冲突的事实。", "过期的事实应该被更新或删除。"]),
 "zh-08": ("混合检索", ["混合检索同时使用稀疏检索和稠密检索。", "倒数排名融合按排名合并多个结果列表。", "倒数排名融合不需要对分数做归一化。", "混合检索在专有名词较多的查询上更稳健。"]),
 "zh-09": ("评估指标", ["命中率表示前k个结果中是否包含相关文档。", "平均倒数排名衡量第一个相关文档出现得有多早。", "归一化折损累计增益同时考虑相关程度和位置。", "召回率衡量相关文档被找回的比例。"]),
 "zh-10": ("延迟分析", ["智能体的总延迟包括嵌入、检索、重排序和生成四个阶段。", "大模型生成通常是最慢的阶段。", "第95百分位延迟反映用户遇到的慢请求。", "批量嵌入可以降低嵌入阶段的延迟。"]),
 "zh-11": ("大模型幻觉", ["幻觉是指模型生成与事实不符的内容。", "提供可靠的上下文可以降低幻觉。", "要求模型引用来源有助于发现幻觉。", "忠实度指标检查回答是否被上下文支持。"]),
 "zh-12": ("嵌入模型", ["嵌入模型把文本映射为稠密向量。", "语义相近的文本在向量空间中距离更近。", "余弦相似度常用于比较两个向量。", "多语言嵌入模型可以跨语言检索。"]),
 "en-01": ("Retrieval-augmented generation", ["Retrieval-augmented generation first retrieves relevant documents from a knowledge base.", "The retrieved documents are added to the prompt together with the user question.", "Grounding the answer in documents reduces hallucinations.", "Updating the knowledge base needs no retraining of the model."]),
 "en-02": ("Vector databases", ["A vector database stores embedding vectors of text.", "It uses approximate nearest neighbour indexes to speed up similarity search.", "Popular vector databases include Qdrant, Milvus and FAISS.", "Metadata stored next to the vectors allows filtering."]),
 "en-03": ("BM25", ["BM25 is a sparse ranking function based on term frequency and inverse document frequency.", "The parameter k1 controls how quickly term frequency saturates.", "The parameter b controls document length normalisation.", "BM25 needs no training data."]),
 "en-04": ("Reranking", ["A reranker rescores the candidates returned by the first retrieval stage.", "A cross-encoder reads the query and the document together, which makes it more accurate.", "Reranking adds latency to every request.", "Usually only the top few dozen candidates are reranked."]),
 "en-05": ("Chunking", ["Chunking splits long documents into shorter passages.", "Chunks that are too large bring in irrelevant text.", "Chunks that are too small lose context.", "An overlap between neighbouring chunks keeps sentences from being cut."]),
 "en-06": ("Short-term memory", ["Short-term memory keeps the last few turns of the current conversation.", "The memory window sets how many turns are kept.", "A window that is too small forgets what the user just said.", "A window that is too large wastes context length and money."]),
 "en-07": ("Long-term memory", ["Long-term memory keeps user preferences and facts across sessions.", "Long-term memories are usually stored in a vector store and retrieved on demand.", "Facts are deduplicated and conflicts merged before they are written.", "Outdated facts should be updated or deleted."]),
 "en-08": ("Hybrid search", ["Hybrid search combines sparse retrieval and dense retrieval.", "Reciprocal rank fusion merges several result lists by rank.", "Reciprocal rank fusion needs no score normalisation.", "Hybrid search is more robust on queries full of proper nouns."]),
 "en-09": ("Ranking metrics", ["Hit rate tells whether a relevant document appears in the top k results.", "Mean reciprocal rank measures how early the first relevant document appears.", "Normalised discounted cumulative gain accounts for graded relevance and position.", "Recall measures the share of relevant documents that were retrieved."]),
 "en-10": ("Latency", ["The total latency of an agent covers embedding, retrieval, reranking and generation.", "Generation by the language model is usually the slowest stage.", "The 95th percentile latency shows the slow requests users notice.", "Batching embeddings lowers the latency of the embedding stage."]),
 "en-11": ("Hallucinations", ["A hallucination is generated content that contradicts the facts.", "Reliable context lowers the rate of hallucinations.", "Asking the model to cite sources helps to spot hallucinations.", "A faithfulness metric checks whether the answer is supported by the context."]),
 "en-12": ("Embedding models", ["An embedding model maps text to a dense vector.", "Texts with similar meaning lie close together in the vector space.", "Cosine similarity is the usual way to compare two vectors.", "Multilingual embedding models can retrieve across languages."]),
}
# (doc, sentence index of the reference, question)
QUESTIONS = [
 ("zh-01",0,"检索增强生成第一步做什么？"),("zh-01",3,"资料换新以后模型还要再训练一遍吗？"),
 ("zh-02",1,"向量数据库用什么索引加速相似度搜索？"),("zh-02",2,"有哪些常用的产品可以存放嵌入？"),
 ("zh-03",0,"BM25是什么检索算法？"),("zh-03",2,"BM25里哪个参数和篇幅长短有关？"),
 ("zh-04",1,"为什么交叉编码器更准确？"),("zh-04",2,"精排会让请求变慢吗？"),
 ("zh-05",1,"分块太大会怎样？"),("zh-05",3,"切片之间为什么要有一部分重复？"),
 ("zh-06",1,"记忆窗口决定什么？"),("zh-06",3,"保留太多轮对话会带来什么代价？"),
 ("zh-07",0,"长期记忆保存什么？"),("zh-07",2,"保存用户事实之前要怎样处理重复和矛盾？"),
 ("zh-08",1,"倒数排名融合如何合并结果列表？"),("zh-08",3,"查询里有很多专有名词时该用哪种检索？"),
 ("zh-09",1,"平均倒数排名衡量什么？"),("zh-09",2,"NDCG同时看哪两个方面？"),
 ("zh-10",0,"智能体的总延迟包括哪些阶段？"),("zh-10",2,"P95延迟说明了什么？"),
 ("zh-11",0,"什么是幻觉？"),("zh-11",3,"怎样判断回答是否有上下文依据？"),
 ("zh-12",0,"嵌入模型把文本映射成什么？"),("zh-12",3,"能不能用中文问题找到英文文档？"),
 ("en-01",0,"What does retrieval-augmented generation do first?"),("en-01",3,"Must the model be trained again when new documents arrive?"),
 ("en-02",1,"Which indexes speed up similarity search in a vector database?"),("en-02",2,"Which products are commonly used to store embeddings?"),
 ("en-03",0,"What kind of ranking function is BM25?"),("en-03",2,"Which BM25 setting deals with long documents?"),
 ("en-04",1,"Why is a cross-encoder more accurate?"),("en-04",2,"Does a second scoring stage slow requests down?"),
 ("en-05",1,"What happens when chunks are too large?"),("en-05",3,"Why should passages share some text with the next one?"),
 ("en-06",1,"What does the memory window set?"),("en-06",3,"What does keeping too many turns cost?"),
 ("en-07",0,"What does long-term memory keep?"),("en-07",2,"How are duplicate or conflicting user facts handled before saving?"),
 ("en-08",1,"How does reciprocal rank fusion merge result lists?"),("en-08",3,"Which search works better for queries with many names?"),
 ("en-09",1,"What does mean reciprocal rank measure?"),("en-09",2,"Which two aspects does NDCG consider?"),
 ("en-10",0,"Which stages does the total latency of an agent cover?"),("en-10",2,"What does P95 latency tell us?"),
 ("en-11",0,"What is a hallucination?"),("en-11",3,"How can we tell whether an answer is backed by its sources?"),
 ("en-12",0,"What does an embedding model map text to?"),("en-12",3,"Can a Chinese question find an English document?"),
]
# Long-term memory: facts from earlier sessions, per user.
FACTS = [
 ("u-zh", "mem-zh-1", "用户偏好使用Qdrant作为向量数据库。", "2026-10-02T09:00:00"),
 ("u-zh", "mem-zh-2", "用户的项目名叫星图，是一个客服智能体。", "2026-10-05T14:30:00"),
 ("u-zh", "mem-zh-3", "用户希望回答使用中文并且简洁。", "2026-10-09T10:15:00"),
 ("u-zh", "mem-zh-4", "用户的检索预算是每个请求不超过200毫秒。", "2026-10-12T16:45:00"),
 ("u-en", "mem-en-1", "The user prefers Milvus as the vector database.", "2026-10-03T08:00:00"),
 ("u-en", "mem-en-2", "The user's project is called Starmap, a support agent.", "2026-10-06T11:20:00"),
 ("u-en", "mem-en-3", "The user wants short answers in English.", "2026-10-10T13:05:00"),
 ("u-en", "mem-en-4", "The user's retrieval budget is 150 milliseconds per request.", "2026-10-13T17:40:00"),
]
LONG_Q = [
 ("u-zh","mem-zh-1","我偏好哪个向量数据库？"),("u-zh","mem-zh-2","我的项目叫什么名字？"),
 ("u-zh","mem-zh-3","我希望回答用什么语言？"),("u-zh","mem-zh-4","我的检索预算是多少毫秒？"),
 ("u-en","mem-en-1","Which vector database do I prefer?"),("u-en","mem-en-2","What is my project called?"),
 ("u-en","mem-en-3","In which language do I want answers?"),("u-en","mem-en-4","What is my retrieval budget per request?"),
]
# Short-term memory: multi-turn sessions; the answer is in an earlier turn of the same session.
SESSIONS = [
 ("s-zh-1", "u-zh", ["我们今天要评估的数据集有三千条样本。", "好的，我会按批处理这些样本。", "评估结果要在周五之前发给产品经理。", "明白，周五之前发送。"],
  [("我们的数据集有多少条样本？", 0), ("评估结果要什么时候发出？", 2)]),
 ("s-zh-2", "u-zh", ["这次实验把top_k设为五。", "收到，top_k为五。", "重排序模型选用交叉编码器。", "好的，使用交叉编码器。"],
  [("这次实验的top_k是多少？", 0), ("重排序模型选的是什么？", 2)]),
 ("s-en-1", "u-en", ["Our evaluation set has two thousand questions.", "Fine, I will batch them.", "The report is due to the team lead on Thursday.", "Understood, Thursday."],
  [("How many questions are in our evaluation set?", 0), ("When is the report due?", 2)]),
 ("s-en-2", "u-en", ["For this run we set top_k to three.", "Noted, top_k is three.", "We picked BM25 as the first-stage retriever.", "Okay, BM25 first."],
  [("What did we set top_k to?", 0), ("Which first-stage retriever did we pick?", 2)]),
]
# References labelled wrong (label 0): a plausible but false reference answer.
WRONG = {"zh-03:2": "BM25的参数b控制词频饱和的速度。", "en-04:2": "Reranking makes every request faster.",
         "zh-10:2": "第95百分位延迟反映平均请求的速度。", "en-12:3": "Multilingual embedding models only work in English.",
         "mem-zh-4": "用户的检索预算是每个请求不超过一秒。", "s-en-1:2": "The report is due on Monday."}


def main() -> None:
    corpus = [{"id": d, "title": t, "text": "".join(s) if d.startswith("zh") else " ".join(s),
               "lang": d[:2]} for d, (t, s) in DOCS.items()]
    examples = []
    for d, i, q in QUESTIONS:
        key = f"{d}:{i}"
        examples.append({"id": f"q-{d}-{i}", "query": q, "reference_answer": WRONG.get(key, DOCS[d][1][i]),
                         "label": 0 if key in WRONG else 1, "relevant_context_ids": [d], "session_id": "u-zh" if d.startswith("zh") else "u-en"})
    for user, mid, q in LONG_Q:
        text = next(f[2] for f in FACTS if f[1] == mid)
        examples.append({"id": f"q-{mid}", "query": q, "reference_answer": WRONG.get(mid, text), "label": 0 if mid in WRONG else 1,
                         "relevant_context_ids": [mid], "session_id": user})
    for sid, user, turns, qs in SESSIONS:
        history = [{"role": "user" if j % 2 == 0 else "assistant", "content": t} for j, t in enumerate(turns)]
        for q, j in qs:
            key = f"{sid}:{j}"
            examples.append({"id": f"q-{sid}-{j}", "query": q, "reference_answer": WRONG.get(key, turns[j]),
                             "label": 0 if key in WRONG else 1, "relevant_context_ids": [f"turn-{j}"],
                             "session_id": user, "history": history, "conversation_id": sid})  # type: ignore[dict-item]
    memory = [{"user_id": u, "id": i, "text": t, "timestamp": ts} for u, i, t, ts in FACTS]
    (HERE / "reference_corpus.json").write_text(json.dumps({"documents": corpus, "memories": memory}, ensure_ascii=False, indent=1), encoding="utf-8")
    for e in examples:
        e.pop("conversation_id", None)
    (HERE / "reference_eval.json").write_text(json.dumps(examples, ensure_ascii=False, indent=1), encoding="utf-8")
    print(len(corpus), len(examples), sum(e["label"] == 0 for e in examples))


if __name__ == "__main__":
    main()
