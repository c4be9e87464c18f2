"""How a failed request to an LLM or embeddings endpoint is classified (:mod:`ragmem.llm`):

- ``transient``: retried with backoff (429, 5xx other than 501, timeouts, connection errors);
  400, 401, 403, 404, 422 and 501 are answers no retry changes;
- ``endpoint_failure``: what the circuit breaker (:class:`ragmem.endpoints.Breaker`) counts against
  the endpoint itself;
- ``rejects_format``: an HTTP 400 that names the response format (the fallback's cue);
- ``describe``: the one-line reason recorded per item.
"""

from __future__ import annotations


def retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def transient(exc: Exception) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError)):
        return True
    # 501 Not Implemented (a server without embeddings, say) is an answer no retry changes
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500 and exc.status_code != 501


def endpoint_failure(exc: Exception) -> bool | None:
    """For the circuit breaker: True when the endpoint itself failed (connection refused, reset,
    DNS, TLS; 401/403/404), False for another failure (timeout, 429, 5xx), None when the endpoint
    answered (400, 422: about this request, not the endpoint)."""
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code in (401, 403, 404):
            return True
        return False if exc.status_code >= 429 else None
    return False


def rejects_format(exc: Exception) -> bool:
    import openai

    text = str(exc).lower()
    return isinstance(exc, openai.BadRequestError) and ("response_format" in text or "json_schema" in text
                                                        or "json_object" in text)


def describe(exc: Exception) -> str:
    status = getattr(exc, "status_code", None)
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {first}"
