"""Benchmarks across hosts made of network namespaces: scale_out.py and its parts (peers, pes,
native, moe, report), collectives_hosts.py, and the loopback model scale_out_model.py."""
