"""`make bench`: run every benchmark in one process tree, one after another.

    python bench/run_all.py [--quick]

Each script prints its own table; run them together so the figures in
docs/performance.md come from one run on one machine state.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["ledger.py", "assembly.py", "turn.py", "tui.py", "context_sim.py"]


def main() -> int:
    extra = sys.argv[1:]
    failed = 0
    for name in SCRIPTS:
        path = HERE / name
        if not path.exists():
            continue
        print(f"\n## {name}\n", flush=True)
        t0 = time.perf_counter()
        code = subprocess.call([sys.executable, str(path), *extra])
        print(f"\n({name}: {time.perf_counter() - t0:.1f} s, exit {code})", flush=True)
        failed |= code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
