"""Writes demo_bilingual.json (text written for ragmem). Run it (importing it writes nothing):
    python ragmem/datasets/build_demo.py
"""
import json
from pathlib import Path

HERE = Path(__file__).parent  # the files are written beside this script, wherever it is run from
# (query, contexts[(source, text)], generated, reference, label)
zh = [
 ("什么是检索增强生成（RAG）？", [("rag","检索增强生成先从知识库检索相关文档，再把文档交给大模型生成答案"),("rag","RAG可以减少大模型的幻觉"),("memory_long","用户偏好简洁的中文回答")],
  "RAG先检索知识库中的相关文档，再让大模型基于文档生成答案", "RAG先从知识库检索相关文档，再交给大模型生成答案", 1),
 ("向量数据库的作用是什么？", [("rag","向量数据库存储文本的embedding向量"),("rag","向量数据库支持近似最近邻搜索"),("memory_short","用户刚才问过Qdrant")],
  "向量数据库存储embedding向量并支持近似最近邻搜索", "向量数据库存储embedding向量，支持近似最近邻搜索", 1),
 ("重排序模型（reranker）有什么用？", [("rag","reranker对初步检索的结果重新打分排序"),("rag","重排序可以提高检索结果的相关性")],
  "reranker对检索结果重新排序，提高相关性", "reranker对初步检索结果重新打分排序，提高检索结果的相关性", 1),
 ("短期记忆存储什么内容？", [("memory_short","短期记忆保存当前会话最近几轮对话"),("memory_long","长期记忆保存用户跨会话的偏好")],
  "短期记忆保存当前会话最近几轮对话", "短期记忆保存当前会话中最近几轮的对话内容", 1),
 ("长期记忆存储什么内容？", [("memory_long","长期记忆保存用户跨会话的偏好和事实"),("memory_short","用户刚才说想要表格格式")],
  "长期记忆保存用户最近一轮的对话", "长期记忆保存用户跨会话的偏好和事实", 1),
 ("文本分块大小如何影响检索？", [("rag","分块太大会引入无关内容，分块太小会丢失上下文"),("rag","常见分块大小为256到512个token")],
  "分块太大会引入无关内容，太小会丢失上下文", "分块太大引入无关内容，分块太小丢失上下文", 1),
 ("top_k参数控制什么？", [("rag","top_k决定检索返回的文档数量"),("rag","top_k越大召回越高但噪声也越多")],
  "top_k决定检索返回的文档数量", "top_k决定检索返回多少个文档", 1),
 ("BM25是什么算法？", [("rag","BM25是基于词频和逆文档频率的稀疏检索算法"),("rag","BM25不需要训练")],
  "BM25是一种基于词频和逆文档频率的稀疏检索算法", "BM25是基于词频和逆文档频率的稀疏检索算法", 1),
 ("混合检索如何融合结果？", [("rag","混合检索用倒数排名融合合并稀疏检索和稠密检索的结果"),("rag","倒数排名融合只依赖排名而不依赖分数")],
  "混合检索直接取稠密检索的结果", "混合检索用倒数排名融合合并稀疏和稠密检索的结果", 1),
 ("什么是嵌入模型？", [("rag","嵌入模型把文本转换为稠密向量"),("rag","语义相近的文本向量距离更近")],
  "嵌入模型把文本转换为稠密向量", "嵌入模型把文本转换为稠密向量表示", 1),
 ("什么是大模型幻觉？", [("rag","幻觉指模型生成与事实不符的内容"),("rag","检索增强可以降低幻觉")],
  "幻觉指模型生成与事实不符的内容", "幻觉是模型检索速度太慢", 0),
 ("记忆窗口设置多大合适？", [("memory_short","记忆窗口通常保留最近5到10轮对话"),("memory_long","用户的对话通常很长")],
  "记忆窗口通常保留最近5到10轮对话", "记忆窗口应该保留全部历史对话", 0),
 ("余弦相似度衡量什么？", [("rag","余弦相似度衡量两个向量方向的接近程度"),("rag","余弦相似度的取值范围是负1到1")],
  "余弦相似度衡量两个向量方向的接近程度", "余弦相似度衡量两个向量的长度之和", 0),
 ("为什么要评估RAG系统？", [("rag","评估可以发现检索和生成中的问题"),("rag","评估结果用于比较不同配置")],
  "评估可以发现检索和生成的问题，并比较不同配置", "评估可以发现检索和生成中的问题，并比较不同配置", 1),
 ("用户喜欢什么语言的回答？", [("memory_long","用户偏好中文回答"),("memory_short","用户刚才用中文提问")],
  "用户偏好中文回答", "用户偏好英文回答", 0),
 ("用户上次提到的项目叫什么？", [("memory_long","用户上周提到的项目叫星图"),("memory_short","用户今天在问检索问题")],
  "用户上次提到的项目叫星图", "用户提到的项目叫星图", 1),
 ("召回率衡量什么？", [("rag","召回率衡量真实正例中被正确找出的比例"),("rag","精确率衡量预测为正的样本中真正为正的比例")],
  "召回率衡量预测为正的样本中真正为正的比例", "召回率衡量真实正例中被正确找出的比例", 1),
 ("延迟主要来自哪些阶段？", [("rag","总延迟包括嵌入、检索、重排序和大模型生成四个阶段"),("rag","大模型生成通常最慢")],
  "总延迟包括嵌入、检索、重排序和大模型生成", "延迟只来自网络传输", 0),
]
en = [
 ("What does retrieval-augmented generation do?", [("rag","Retrieval-augmented generation retrieves relevant documents and passes them to a language model"),("rag","RAG grounds answers in external knowledge")],
  "It retrieves relevant documents and passes them to a language model to ground the answer", "RAG retrieves relevant documents and passes them to a language model, grounding answers in external knowledge", 1),
 ("Why use a reranker after retrieval?", [("rag","A reranker rescores the retrieved candidates with a cross-encoder"),("rag","Reranking improves precision at the top of the list")],
  "A reranker rescores retrieved candidates with a cross-encoder and improves precision at the top", "A reranker rescores retrieved candidates with a cross-encoder to improve precision at the top of the list", 1),
 ("What is stored in short-term memory?", [("memory_short","Short-term memory keeps the last few turns of the current conversation"),("memory_long","Long-term memory keeps user facts across sessions")],
  "The last few turns of the current conversation", "Short-term memory keeps the last few turns of the current conversation", 1),
 ("What is stored in long-term memory?", [("memory_long","Long-term memory keeps user preferences and facts across sessions"),("memory_short","The user asked about chunking a moment ago")],
  "Long-term memory keeps user preferences and facts across sessions", "Long-term memory keeps user preferences and facts across sessions", 1),
 ("How does chunk size affect retrieval?", [("rag","Large chunks add irrelevant text while small chunks lose context"),("rag","Typical chunk sizes are 256 to 512 tokens")],
  "Large chunks add irrelevant text, small chunks lose context", "Large chunks add irrelevant text while small chunks lose context", 1),
 ("What does top_k control?", [("rag","top_k sets how many documents the retriever returns"),("rag","A larger top_k raises recall but adds noise")],
  "top_k sets how many documents the retriever returns", "top_k sets the number of documents the retriever returns", 1),
 ("What is BM25?", [("rag","BM25 is a sparse ranking function based on term frequency and inverse document frequency"),("rag","BM25 needs no training")],
  "BM25 is a dense neural retriever trained on question pairs", "BM25 is a sparse ranking function based on term frequency and inverse document frequency", 1),
 ("How does hybrid search merge results?", [("rag","Hybrid search merges sparse and dense results with reciprocal rank fusion"),("rag","Reciprocal rank fusion uses ranks, not scores")],
  "Hybrid search merges sparse and dense results with reciprocal rank fusion", "Hybrid search merges sparse and dense results with reciprocal rank fusion", 1),
 ("What is an embedding model?", [("rag","An embedding model maps text to a dense vector"),("rag","Similar texts have nearby vectors")],
  "An embedding model maps text to a dense vector", "An embedding model maps text to a dense vector representation", 1),
 ("What is a hallucination?", [("rag","A hallucination is generated content that is not supported by facts"),("rag","Retrieval reduces hallucinations")],
  "A hallucination is generated content not supported by facts", "A hallucination is a slow database query", 0),
 ("Which language does the user prefer?", [("memory_long","The user prefers answers in English"),("memory_short","The user wrote in English today")],
  "The user prefers answers in English", "The user prefers answers in Chinese", 0),
 ("What does cosine similarity measure?", [("rag","Cosine similarity measures how close two vectors point in direction"),("rag","Cosine similarity ranges from minus one to one")],
  "Cosine similarity measures how close two vectors point in direction", "Cosine similarity measures the sum of two vector lengths", 0),
 ("What does recall measure?", [("rag","Recall is the share of actual positives that were found"),("rag","Precision is the share of predicted positives that are correct")],
  "Recall is the share of actual positives that were found", "Recall is the share of actual positives that were found", 1),
 ("What project did the user mention last week?", [("memory_long","Last week the user mentioned a project called Starmap"),("memory_short","Today the user asks about retrieval")],
  "The user mentioned a project called Starmap", "The user mentioned the Starmap project last week", 1),
 ("Where does latency come from in a RAG agent?", [("rag","Total latency covers embedding, retrieval, reranking and generation"),("rag","Generation by the language model is usually the slowest stage")],
  "Latency covers embedding, retrieval, reranking and generation, with generation the slowest", "Total latency covers embedding, retrieval, reranking and generation", 1),
 ("How large should the memory window be?", [("memory_short","A memory window usually keeps the last 5 to 10 turns"),("memory_long","The user's sessions are long")],
  "A memory window usually keeps the last 5 to 10 turns", "A memory window should keep the whole history forever", 0),
 ("Why evaluate a RAG system?", [("rag","Evaluation finds problems in retrieval and generation"),("rag","Evaluation results compare configurations")],
  "To find problems in retrieval and generation and compare configurations", "Evaluation finds problems in retrieval and generation and compares configurations", 1),
 ("What does a vector database do?", [("rag","A vector database stores embeddings and supports approximate nearest neighbour search"),("memory_short","The user asked about Qdrant")],
  "It stores embeddings and runs approximate nearest neighbour search", "A vector database stores embeddings and supports approximate nearest neighbour search", 1),
]


def main() -> None:
    out = []
    for lang, rows in (("zh", zh), ("en", en)):
        for i, (q, ctx, gen, ref, label) in enumerate(rows, 1):
            out.append({"id": f"{lang}-{i:02d}", "query": q,
                        "context": [{"id": f"{lang}-{i:02d}-c{j}", "source": s, "text": t} for j, (s, t) in enumerate(ctx, 1)],
                        "generated_answer": gen, "reference_answer": ref, "label": label})
    (HERE / "demo_bilingual.json").write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    print(len(out), sum(1 for o in out if o["label"] == 0))


if __name__ == "__main__":
    main()
