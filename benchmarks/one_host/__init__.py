"""Benchmarks on one host: the suite of benchmarks/run.py (suite, summary, figures and its PE
side python_bench.py), torch's symm_mem API (symm_mem_*), reductions and teams."""
