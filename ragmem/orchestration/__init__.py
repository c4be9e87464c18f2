"""Prefect (layer orchestration, the shell: imports the core; the core never imports it).

Which Prefect API a run reports to, and a flow run (prefect_api); the home's managed Prefect
server and its port (server). The tasks and flows themselves are the project's tasks/ and flows/.
"""
