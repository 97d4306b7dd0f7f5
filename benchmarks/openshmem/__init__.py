"""Ours against Open MPI's OSHMEM through the OpenSHMEM API: OSU's programs (osu_openshmem.py)
and the atomics and non-blocking puts (atomics.py)."""
