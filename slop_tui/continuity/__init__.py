"""Continuity over long sessions: the background model work that keeps a session
within its budget and resumable (summaries, compaction, handoffs). Headless."""
