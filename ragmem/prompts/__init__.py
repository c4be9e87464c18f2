"""What the LLM judge is asked (layer prompts: imports nothing of ragmem).

The prompt templates, their version and hash, the reply shapes and their validation (templates), and
the rubrics: criteria of the user's own, read by the config schema (rubrics).
"""
