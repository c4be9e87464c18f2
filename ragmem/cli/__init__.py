"""The ragmem command (layer cli, the top: may import everything).

The console script's first code (entry), the commands (app, services), what they share (common),
ragmem init's starter files (starter), and cron deployments and trigger (scheduling).
``python -m ragmem.cli`` runs the command (__main__).
"""
