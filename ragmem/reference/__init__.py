"""The reference RAG + memory agent: small, real, offline by default, and tunable by sweeps.

    agent.type: reference      uses the top-level sections corpus, retriever, memory, generator

See :class:`ragmem.reference.agent.ReferenceAgent`.
"""
