"""Statistics over per-example results (layer stats: imports metrics and below; no file, no MLflow).

Bootstrap and Poisson intervals, two-stage intervals for repeated judge samples and the paired tests
(intervals); a run's values and intervals added up chunk by chunk (run_statistics); two runs
compared chunk by chunk on their shared examples, for compare, gates and a sweep's ties
(paired_runs). Nothing here reads a file or calls MLflow.
"""
