"""MegaMoE's benchmarks: the suite of benchmarks/run.py --moe (suite.py, its PE side
moe_bench.py), the reductions of its training step, its trace and the experts as DTensors."""
