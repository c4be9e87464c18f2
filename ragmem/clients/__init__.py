"""What calls out (layer clients: imports config and below).

Endpoints, their preflight and circuit breakers (endpoints), the one call policy: retries, backoff,
Retry-After, the failure line (calls), the OpenAI-compatible judge and embedding clients
(llm_client), and what they return (replies).
"""
