"""Memory benchmarks (layer memory: imports the components layer, agents, judges and reference, and below).

LoCoMo and LongMemEval data (locomo, longmemeval), each benchmark's rules (bench_data), a benchmark's
steps and scores (benchmark), the memory layers it runs: Python, HTTP, MCP (layers, mcp_layer), and
a benchmark compared with its rerun (bench_compare).
"""
