"""One new process's warm start and one-file change of a repository map, as JSON.

    python bench/repomap_process.py REPO BUDGET ROUND [keeper]   (ROUND -1: build the store)

Run by `context_sources.py --against DIR` with `PYTHONPATH` set to the build
to measure (this file imports `slop_tui` from the path, not from the bench's
checkout), so two builds can be timed in turns within one run. `REPO` holds a
generated repository whose store this build made. Imports, the tokenizer, the
parser and numpy are loaded before the clock starts (as in
`context_sources.py`). Prints the milliseconds of:

With `keeper` the maps ask the project's watcher process (`repomap.watcher_process`,
started by the bench) what changed since their stamps' token, as the app's do.

- `warm`: a new map over the store, watching: refresh and render;
- `look`: of which looking at the files (`RepoMap.scan_ms`);
- `next`: the first request's map after it (refresh and a render with a count
  of its own);
- `change`: one file changed (a new function), then refresh and render;
- `change_stat`: the same seen by a map that does not watch (every file
  stat'ed; it does not ask the watcher process either).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> None:
    repo, budget, round_ = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    # Only a build that has the watcher process is given `keeper` (an older one has
    # no such argument).
    keeper = {"keeper": True} if sys.argv[4:] == ["keeper"] else {}
    import numpy  # noqa: F401  (loaded by the app's first large ranking)
    from watchfiles import _rust_notify  # noqa: F401

    from slop_tui.context.tokens import default_counter
    from slop_tui.repomap import RepoMap
    from slop_tui.repomap.tags import extract

    if keeper:
        # The app imports it before its map is made (`Workspace.repo_map`).
        from slop_tui.repomap import watcher_client  # noqa: F401

    count = default_counter().count
    count("warm the tokenizer")
    extract("warm.py", b"def parser_loaded(): pass\n")
    files = sorted(repo.glob("pkg*/sub*/*.py"))
    out: dict[str, float] = {}
    if round_ < 0:
        rm = RepoMap(repo, repo / ".slop", watch=True, **keeper)
        rm.refresh()
        rm.render(budget, count)
        rm.close()
        return

    t = time.perf_counter()
    rm = RepoMap(repo, repo / ".slop", watch=True, **keeper)
    rm.refresh()
    rm.render(budget, count)
    out["warm"] = (time.perf_counter() - t) * 1000
    assert rm.parsed == 0, rm.parsed
    out["look"] = rm.scan_ms
    out["stats"] = rm.looked
    if keeper:
        assert rm.told == "keeper", rm.told
    t = time.perf_counter()
    rm.refresh()
    rm.render(budget, lambda text: count(text))
    out["next"] = (time.perf_counter() - t) * 1000
    assert rm.watching and rm.looked == 0, rm.looked

    for key, watch, offset in (("change", rm, 0), ("change_stat", None, 11)):
        if watch is None:
            rm.close()
            rm = RepoMap(repo, repo / ".slop", watch=False)
            rm.refresh()
            rm.render(budget, count)
        p = files[(round_ * 37 + offset) % len(files)]
        p.write_text(p.read_text() + f"\n\ndef added_{round_}_{offset}(x):\n    return x\n")
        t = time.perf_counter()
        rm.refresh()
        rm.render(budget, count)
        out[key] = (time.perf_counter() - t) * 1000
        assert rm.parsed == 1, rm.parsed
    rm.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
