"""Test sets generated from a team's own documents (``ragmem generate``): the documents read, offline
retrieval probes, and (later) LLM-written questions checked before they are kept."""
