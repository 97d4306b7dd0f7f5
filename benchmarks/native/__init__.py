"""The native programs (shmem_bench.cc, oshmem_bench.c) and the drivers that run builds of
shmem_bench against each other (ab_native.py) and all_gather's algorithms (all_gather_algorithms.py)."""
