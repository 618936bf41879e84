"""Precision and recall of the anchor detector on the labelled corpus.

    python bench/constraints.py [--show]

Reads tests/data/constraint_corpus.txt (the corpus the rules were written
against) and tests/data/constraint_heldout.txt (written after, never used to
tune them), each (`C<TAB>sentence`: a rule or a value
stated with its subject, which must survive a summary; `O<TAB>sentence`: an
ordinary sentence) and runs `slop_tui.context.constraints.classify` on each
sentence. A positive is a sentence classified as a rule or a value.
`--show` lists the misses and the false alarms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from slop_tui.context.constraints import classify  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "constraint_corpus.txt"
HELDOUT = ROOT / "tests" / "data" / "constraint_heldout.txt"


def load(path: Path = CORPUS) -> list[tuple[bool, str]]:
    """(is a rule or value, sentence) for each labelled line."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, _, sentence = line.partition("\t")
        if label not in ("C", "O") or not sentence.strip():
            raise ValueError(f"{path.name}: bad line {line!r}")
        out.append((label == "C", sentence.strip()))
    return out


def measure(corpus: list[tuple[bool, str]]) -> dict:
    tp = fp = fn = tn = 0
    misses, alarms = [], []
    for positive, sentence in corpus:
        found = classify(sentence) is not None
        if positive and found:
            tp += 1
        elif positive:
            fn += 1
            misses.append(sentence)
        elif found:
            fp += 1
            alarms.append(sentence)
        else:
            tn += 1
    return {
        "positives": tp + fn,
        "negatives": fp + tn,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "misses": misses,
        "false_alarms": alarms,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true", help="list misses and false alarms")
    args = ap.parse_args()
    for name, path in (("corpus", CORPUS), ("held out", HELDOUT)):
        r = measure(load(path))
        print(
            f"{name}: {r['positives']} rule/value sentences, {r['negatives']} ordinary ones: "
            f"precision {r['precision']:.1%}, recall {r['recall']:.1%} "
            f"({len(r['misses'])} missed, {len(r['false_alarms'])} false alarm(s))"
        )
        if args.show:
            for s in r["misses"]:
                print("  missed:", s)
            for s in r["false_alarms"]:
                print("  false alarm:", s)


if __name__ == "__main__":
    main()
