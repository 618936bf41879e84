"""The SQLite ledger: the source of truth, and the only code that touches SQLite.

`await Ledger.open(path)` gives one long-lived connection (WAL, foreign keys,
a busy timeout) with the schema migrated forward. Every method is async and
returns frozen records from `slop_tui.records`, never rows or dicts.
"""

from __future__ import annotations

from slop_tui.ledger.continuity import (
    LANE_FORMS,
    ContinuityMixin,
    check_lane,
    lane_group,
    reply_lane,
)
from slop_tui.ledger.core import LedgerError, database_problem
from slop_tui.ledger.edits import EditsMixin
from slop_tui.ledger.history import HistoryMixin, check_session_name, snippet
from slop_tui.ledger.inflight import InflightMixin, Recovered, TurnJournal
from slop_tui.ledger.knowledge import KnowledgeMixin, normalise_tags
from slop_tui.ledger.schema import SCHEMA_VERSION


class Ledger(EditsMixin, InflightMixin, HistoryMixin, KnowledgeMixin, ContinuityMixin):
    """Sessions, messages, STATE, usage, memos, skills, tools, summaries, continuity,
    the in-flight record of running turns (recovered on open after a kill), and the
    journal of edits with the trash they move rows to (nothing is hard-deleted)."""


__all__ = [
    "LANE_FORMS",
    "ContinuityMixin",
    "EditsMixin",
    "Ledger",
    "LedgerError",
    "Recovered",
    "TurnJournal",
    "SCHEMA_VERSION",
    "check_lane",
    "check_session_name",
    "database_problem",
    "lane_group",
    "normalise_tags",
    "reply_lane",
    "snippet",
]
