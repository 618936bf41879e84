"""Token counts as the panes show them: one rule for the group list, the session
list, the group headers, the gauge and the sparkline's labels."""

from __future__ import annotations


def compact_tokens(n: int) -> str:
    """1234 -> '1.2k', 45678 -> '45k', 2500000 -> '2.5M': five cells or fewer."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{n // 1000}k"
    return f"{n / 1_000_000:.1f}M"
