"""A traced application for the worked example of docs/traffic.md: the reference RAG + memory agent
answering the bundled questions as a service would, each answer an MLflow trace with the span
types ragmem maps (an AGENT root; MEMORY, RETRIEVER and LLM children), a session and a user.

    python examples/prod_traffic/app.py --n 64                  # 64 questions, traced into prod-demo
    python examples/prod_traffic/app.py --n 64 --fail-every 16  # every 16th raises (a failed call)
    ragmem run configs/traces.yaml                              # evaluate the last 24 hours of them

By default the traces go to the ragmem home's store (where ``configs/traces.yaml`` reads them);
``--tracking-uri`` sends them elsewhere (an ``mlflow server``). MLflow's tracing API is the
application's own instrumentation here: ragmem never calls the agent, it reads what was traced.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import mlflow
from mlflow.entities import Document, SpanType

from ragmem.reference.agent import ReferenceAgent
from ragmem.reference.memory import short_term
from ragmem.runtime.home import tracking_uri

QUESTIONS = Path(__file__).resolve().parents[2] / "ragmem" / "datasets" / "reference_eval.json"


class TracedAgent:
    """The reference agent's stages, each in a span of its own."""

    def __init__(self):
        self.agent = ReferenceAgent({})

    @mlflow.trace(name="recall", span_type=SpanType.MEMORY)
    def recall(self, query: str, user: str, history: list) -> list[dict]:
        found = self.agent.memory.search(query, user, self.agent.long_top_k)
        return [{"id": m["id"], "text": m["text"]} for m in found] + short_term(history, self.agent.short_window)

    @mlflow.trace(name="retrieve", span_type=SpanType.RETRIEVER)
    def retrieve(self, query: str) -> list[Document]:
        hits = self.agent.retriever.search(self.agent.retriever.prepare(query), self.agent.top_k)
        return [Document(page_content=self.agent.chunks[i].text, id=self.agent.chunks[i].id, metadata={"score": s})
                for i, s in hits]

    @mlflow.trace(name="generate", span_type=SpanType.LLM)
    def generate(self, query: str, contexts: list[str]) -> str:
        return self.agent.generate(query, contexts)

    @mlflow.trace(name="answer", span_type=SpanType.AGENT)
    def answer(self, query: str, session: str, user: str, fail: bool = False) -> dict:
        mlflow.update_current_trace(metadata={"mlflow.trace.session": session, "mlflow.trace.user": user})
        memories = self.recall(query, user, [])
        documents = self.retrieve(query)
        if fail:
            raise TimeoutError("the generator did not answer within 30 s")
        text = self.generate(query, [d.page_content for d in documents] + [m["text"] for m in memories])
        return {"answer": text}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="questions answered (the bundled 64, repeated)")
    parser.add_argument("--experiment", default="prod-demo")
    parser.add_argument("--tracking-uri", default=None, help="default: the ragmem home's store")
    parser.add_argument("--fail-every", type=int, default=0, help="every Nth call raises (0: none)")
    args = parser.parse_args(argv)
    mlflow.set_tracking_uri(args.tracking_uri or tracking_uri(None))
    mlflow.set_experiment(args.experiment)
    questions = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    agent, failed = TracedAgent(), 0
    for i in range(args.n):
        q = questions[i % len(questions)]
        user = q.get("session_id") or "anonymous"
        try:
            agent.answer(q["query"], session=f"{user}-{i // 8}", user=user,
                         fail=bool(args.fail_every) and (i + 1) % args.fail_every == 0)
        except TimeoutError:
            failed += 1
    mlflow.flush_trace_async_logging()
    print(f"{args.n} traces written to experiment {args.experiment!r} at {mlflow.get_tracking_uri()} "
          f"({failed} raised)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
