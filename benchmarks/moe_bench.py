"""benchmarks/moe/moe_bench.py under its former path, for the commands that still name it
(scripts/gpu_check.sh): runs that script with the same arguments."""

import os
import runpy
import sys

if __name__ == "__main__":
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moe", "moe_bench.py")
    sys.argv[0] = script
    runpy.run_path(script, run_name="__main__")
