"""The process a run lives in (layer runtime: imports only the base modules, errors, schema and version).

The ragmem home and its working folder (home), which process ran a run and whether it still runs
(processes), Ctrl+C and SIGTERM (interrupts), progress of the long stages (progress), the fork pool
and the process pools the scoring maps run on (forking, parallel), and slow imports made cheap
(imports). Nothing here knows what an evaluation is.
"""
