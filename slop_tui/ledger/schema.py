"""The ledger's schema, as ordered forward migrations keyed by `PRAGMA user_version`.

A migration is a list of SQL statements run in one transaction; the version
is bumped in the same transaction, so a crash leaves the old version intact.
Append new migrations at the end; never edit a released one.
"""

from __future__ import annotations

_STATUSES = "'completed','tool_call','error','dropped','interrupted','summarized'"

_V1 = [
    """CREATE TABLE sessions(
        name TEXT PRIMARY KEY,
        window_size INTEGER NOT NULL DEFAULT 5,
        scratchpad TEXT NOT NULL DEFAULT '',
        provider TEXT,
        model TEXT,
        lane TEXT NOT NULL DEFAULT 'main',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0,
        token_total INTEGER NOT NULL DEFAULT 0
    )""",
    f"""CREATE TABLE messages(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        group_id INTEGER,
        lane TEXT NOT NULL DEFAULT 'main',
        role TEXT NOT NULL CHECK(role IN ('system','user','assistant','tool')),
        content TEXT NOT NULL DEFAULT '',
        payload TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        status TEXT NOT NULL DEFAULT 'completed' CHECK(status IN ({_STATUSES})),
        status_before TEXT,
        parsing_strategy TEXT,
        tokens INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
    # "last N groups of a session (and lane)" and "one group" are index searches.
    "CREATE INDEX ix_messages_session_group ON messages(session_id, group_id, id)",
    "CREATE INDEX ix_messages_session_lane_group ON messages(session_id, lane, group_id)",
    "CREATE INDEX ix_messages_group ON messages(group_id)",
    # Per-session totals are kept by triggers so nothing has to scan to show them.
    """CREATE TRIGGER trg_messages_insert AFTER INSERT ON messages BEGIN
        UPDATE sessions SET message_count = message_count + 1,
                            token_total = token_total + NEW.tokens,
                            updated_at = NEW.created_at
        WHERE name = NEW.session_id;
    END""",
    """CREATE TRIGGER trg_messages_delete AFTER DELETE ON messages BEGIN
        UPDATE sessions SET message_count = message_count - 1,
                            token_total = token_total - OLD.tokens
        WHERE name = OLD.session_id;
    END""",
    """CREATE TRIGGER trg_messages_tokens AFTER UPDATE OF tokens ON messages BEGIN
        UPDATE sessions SET token_total = token_total - OLD.tokens + NEW.tokens
        WHERE name = NEW.session_id;
    END""",
    """CREATE TABLE state_versions(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        group_id INTEGER,
        content TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_state_session ON state_versions(session_id, id)",
    """CREATE TABLE usage(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        group_id INTEGER,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_usage_session ON usage(session_id)",
    """CREATE TABLE memos(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        content TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        created_at REAL NOT NULL
    )""",
    """CREATE VIRTUAL TABLE memos_fts USING fts5(
        content, tags, content='memos', content_rowid='id'
    )""",
    """CREATE TRIGGER trg_memos_insert AFTER INSERT ON memos BEGIN
        INSERT INTO memos_fts(rowid, content, tags) VALUES (NEW.id, NEW.content, NEW.tags);
    END""",
    """CREATE TRIGGER trg_memos_delete AFTER DELETE ON memos BEGIN
        INSERT INTO memos_fts(memos_fts, rowid, content, tags)
        VALUES ('delete', OLD.id, OLD.content, OLD.tags);
    END""",
    """CREATE TRIGGER trg_memos_update AFTER UPDATE ON memos BEGIN
        INSERT INTO memos_fts(memos_fts, rowid, content, tags)
        VALUES ('delete', OLD.id, OLD.content, OLD.tags);
        INSERT INTO memos_fts(rowid, content, tags) VALUES (NEW.id, NEW.content, NEW.tags);
    END""",
    """CREATE TABLE skills(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        prompt_patch TEXT NOT NULL DEFAULT '',
        activation_count INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE tools(
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL DEFAULT '',
        schema_json TEXT NOT NULL DEFAULT '{}',
        enabled INTEGER NOT NULL DEFAULT 1,
        call_count INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE summaries(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        lane TEXT NOT NULL DEFAULT 'main',
        kind TEXT NOT NULL,
        first_message_id INTEGER NOT NULL,
        last_message_id INTEGER NOT NULL,
        content TEXT NOT NULL,
        version INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_summaries_session_lane ON summaries(session_id, lane, id)",
    # The running workspace's own state: current session, active skills,
    # throttle, learned token factor, theme. Not per session (seed 001).
    """CREATE TABLE app_state(
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
]

# Default skills are seeded once, when the ledger is created, so a user who
# deletes one does not see it come back (the reference tool re-seeds).
DEFAULT_SKILLS = (
    (
        "planner",
        "Plan only: study, then write a checklist plan into the scratchpad.",
        "You are in planning mode. Check memos first. Investigate with read-only tools, "
        "then write a numbered checklist plan into the scratchpad (manage_scratchpad). "
        "Do not modify files or run commands that change anything. Ask for approval "
        "of the plan before any implementation.",
    ),
    (
        "code_reviewer",
        "Review only: read the change and report problems before anything is implemented.",
        "You are a strict code reviewer. Read the diff and the surrounding code, then "
        "list correctness bugs, missing tests, unclear names and risky changes, most "
        "serious first, each with file and line. Do not implement fixes until the user "
        "approves them.",
    ),
    (
        "dba",
        "Database specialist: schema design, query plans, migrations.",
        "You are a database specialist. Prefer explicit schemas, indexes that match the "
        "queries, forward-only migrations and EXPLAIN QUERY PLAN before claiming speed.",
    ),
)

# Version 2: continuity. Compaction never destroys the ledger: a
# summarized message keeps its prior status in `status_before` (and
# `summary_status`) and points at the summary covering it
# (`messages.summary_id`); un-compaction restores the
# statuses and marks the summary `superseded`. Every reduction of a request is
# audited in `compaction_log`; handoffs record where work stood; context files
# are the `/file add` set of each session.
_COMPACTION_CASES = "'truncate','summarize','elide','emergency','shed'"
_HANDOFF_REASONS = "'compaction','session_switch','exit','checkpoint','manual'"

_V2 = [
    "ALTER TABLE messages ADD COLUMN summary_id INTEGER",
    # The status a row had when it was summarized. `status_before` holds it too,
    # but a later drop/restore of the group overwrites that; this copy lets
    # un-compaction restore the exact status anyway.
    "ALTER TABLE messages ADD COLUMN summary_status TEXT",
    "CREATE INDEX ix_messages_summary ON messages(summary_id) WHERE summary_id IS NOT NULL",
    "ALTER TABLE summaries ADD COLUMN superseded INTEGER NOT NULL DEFAULT 0",
    f"""CREATE TABLE compaction_log(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        lane TEXT NOT NULL DEFAULT 'main',
        trigger TEXT NOT NULL DEFAULT '',
        case_kind TEXT NOT NULL CHECK(case_kind IN ({_COMPACTION_CASES})),
        tokens_before INTEGER NOT NULL DEFAULT 0,
        tokens_after INTEGER NOT NULL DEFAULT 0,
        summary_id INTEGER,
        first_message_id INTEGER,
        last_message_id INTEGER,
        detail TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_compaction_session ON compaction_log(session_id, id)",
    f"""CREATE TABLE handoffs(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        reason TEXT NOT NULL CHECK(reason IN ({_HANDOFF_REASONS})),
        task TEXT NOT NULL DEFAULT '',
        branch TEXT,
        head_commit TEXT,
        modified_files TEXT NOT NULL DEFAULT '[]',
        untracked_files TEXT NOT NULL DEFAULT '[]',
        completed TEXT NOT NULL DEFAULT '[]',
        remaining TEXT NOT NULL DEFAULT '[]',
        decisions TEXT NOT NULL DEFAULT '[]',
        continuation TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        consumed INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX ix_handoffs_session ON handoffs(session_id, id)",
    """CREATE TABLE context_files(
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        path TEXT NOT NULL,
        added_at REAL NOT NULL,
        PRIMARY KEY(session_id, path)
    )""",
]

# Version 3: the window is a view. A summary is a cache of what lies outside the
# window, never a status of a row: rows that version 2 hid behind a summary get
# their own status back, and the summaries a roll had replaced become reusable
# again (`superseded`: 0 valid, 1 discarded by `/context uncompact`, 2 out of
# date because the history it covers changed). Usage rows say what a call was
# for, so background calls (summaries, compaction) are counted apart.
_V3 = [
    """UPDATE summaries SET superseded = 0 WHERE superseded = 1 AND EXISTS (
        SELECT 1 FROM messages m WHERE m.summary_id = summaries.id
        AND m.status = 'summarized')""",
    """UPDATE messages SET status = COALESCE(summary_status, status_before, 'completed'),
        status_before = NULL WHERE status = 'summarized'""",
    """UPDATE messages SET status_before = COALESCE(summary_status, 'completed')
        WHERE status = 'dropped' AND status_before = 'summarized'""",
    "UPDATE messages SET summary_id = NULL, summary_status = NULL WHERE summary_id IS NOT NULL",
    "ALTER TABLE usage ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn'",
]

# Memo provenance: who wrote a memo (`user`, `model`, or `unknown` for memos saved
# before this was recorded), and whether it waits in quarantine for the user's
# confirmation (an instruction-shaped memo the model saved: never injected,
# never retrieved, not visible to query_db until `/memo confirm`).
_MEMO_PROVENANCE = [
    "ALTER TABLE memos ADD COLUMN source TEXT NOT NULL DEFAULT 'user' "
    "CHECK(source IN ('user','model','unknown'))",
    "ALTER TABLE memos ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0",
    "UPDATE memos SET source = 'unknown'",
]


# The edit journal: every undo, removal, drop, restore, clear and session
# removal is a row here, with enough to invert it. Rows an edit takes away are
# moved, byte for byte, into shadow tables `trash_<table>` (the table's own columns
# plus `trash_edit`, created by the ledger when first needed, see ledger/edits.py),
# so no query over the live tables can meet them; restoring moves them back with
# their ids. `redoable` marks the redo stack (cleared when a turn starts).
_EDIT_KINDS = (
    "'undo','remove','retry','drop','restore','clear','session_remove','trash_restore','empty',"
    "'memo_remove','skill_remove'"
)

_EDIT_JOURNAL = [
    f"""CREATE TABLE edits(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK(kind IN ({_EDIT_KINDS})),
        group_id INTEGER,
        row_id INTEGER,
        message_count INTEGER NOT NULL DEFAULT 0,
        group_count INTEGER NOT NULL DEFAULT 0,
        trashed INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'done' CHECK(state IN ('done','reverted','emptied')),
        redoable INTEGER NOT NULL DEFAULT 0,
        reverts INTEGER,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_edits_session ON edits(session_id, id)",
    "CREATE INDEX ix_edits_redo ON edits(id) WHERE redoable = 1",
    "CREATE INDEX ix_edits_trash ON edits(id) WHERE trashed = 1 AND state = 'done'",
]

# The group list reads these columns of every row of a session (`group_rows`):
# from an index that holds them it never reads the table's rows, with their
# contents (20,000 messages: 23 -> 11 ms).
_GROUP_LIST_INDEX = [
    "CREATE INDEX ix_messages_group_list "
    "ON messages(session_id, group_id, status, lane, tokens, created_at)",
]

# Edits of values, journalled like the edits of the history so /undo and /redo
# bring each back: a STATE set by hand (`row_id`: its version), a scratchpad write
# (`before_value` / `after_value`: the texts), `/context uncompact` (`after_value`:
# the discarded summary ids, JSON), and the drops the engine makes on its own
# (`group_id`: a group set aside; `after_value`: {message id: status before}, JSON).
# SQLite cannot change a CHECK constraint in place: the table is made again.
_VALUE_EDIT_KINDS = _EDIT_KINDS + ",'state_set','scratchpad','uncompact','auto_drop'"
_EDIT_COLUMNS = (
    "id, session_id, kind, group_id, row_id, message_count, group_count, trashed, state, "
    "redoable, reverts, created_at"
)
_VALUE_EDITS = [
    f"""CREATE TABLE edits_v2(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        kind TEXT NOT NULL CHECK(kind IN ({_VALUE_EDIT_KINDS})),
        group_id INTEGER,
        row_id INTEGER,
        message_count INTEGER NOT NULL DEFAULT 0,
        group_count INTEGER NOT NULL DEFAULT 0,
        trashed INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'done' CHECK(state IN ('done','reverted','emptied')),
        redoable INTEGER NOT NULL DEFAULT 0,
        reverts INTEGER,
        created_at REAL NOT NULL,
        before_value TEXT,
        after_value TEXT
    )""",
    f"INSERT INTO edits_v2({_EDIT_COLUMNS}) SELECT {_EDIT_COLUMNS} FROM edits",
    # Ids are never reused: the new table continues the old one's sequence.
    "UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'edits') "
    "WHERE name = 'edits_v2' AND seq < (SELECT seq FROM sqlite_sequence WHERE name = 'edits')",
    "INSERT INTO sqlite_sequence(name, seq) SELECT 'edits_v2', seq FROM sqlite_sequence "
    "WHERE name = 'edits' AND NOT EXISTS "
    "(SELECT 1 FROM sqlite_sequence WHERE name = 'edits_v2')",
    "DROP TABLE edits",
    "ALTER TABLE edits_v2 RENAME TO edits",
    "CREATE INDEX ix_edits_session ON edits(session_id, id)",
    "CREATE INDEX ix_edits_redo ON edits(id) WHERE redoable = 1",
    "CREATE INDEX ix_edits_trash ON edits(id) WHERE trashed = 1 AND state = 'done'",
]

# Cost in money: each usage row carries the reasoning tokens the provider
# reported, whether it reported usage at all (`reported` 0: the counts are not
# known, not zero), and its cost in USD by part, priced when the call was
# recorded (NULL: the model's price was unknown; never a made-up figure).
# `cost_saved` is what the cached input would have cost uncached, minus what it
# cost. The day's spend is summed over `created_at`.
_USAGE_COST = [
    "ALTER TABLE usage ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE usage ADD COLUMN reported INTEGER NOT NULL DEFAULT 1",
    "ALTER TABLE usage ADD COLUMN cost_input REAL",
    "ALTER TABLE usage ADD COLUMN cost_cached REAL",
    "ALTER TABLE usage ADD COLUMN cost_output REAL",
    "ALTER TABLE usage ADD COLUMN cost_reasoning REAL",
    "ALTER TABLE usage ADD COLUMN cost_saved REAL",
    "ALTER TABLE usage ADD COLUMN cost_total REAL",
    "ALTER TABLE usage ADD COLUMN price_source TEXT",
    "CREATE INDEX ix_usage_created ON usage(created_at)",
]

# Context sources. `url_pages`: the pages `/url add` fetched for a session, as Markdown
# (the page text is untrusted input, like a tool result); one row per session and
# address, `/url add` of the same address again fetches it anew. `images`: images
# attached to a prompt, stored once under `.slop/images/<sha256>.<ext>`; a row with no
# `message_id` waits for the session's next prompt (`/image add` in any process), which
# takes it in the transaction that writes the prompt.
_CONTEXT_SOURCES = [
    """CREATE TABLE url_pages(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        url TEXT NOT NULL,
        final_url TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        content_type TEXT NOT NULL DEFAULT '',
        fetched_at REAL NOT NULL,
        UNIQUE(session_id, url)
    )""",
    """CREATE TABLE images(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        message_id INTEGER,
        sha256 TEXT NOT NULL,
        name TEXT NOT NULL,
        mime TEXT NOT NULL,
        width INTEGER NOT NULL,
        height INTEGER NOT NULL,
        size INTEGER NOT NULL,
        added_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_images_message ON images(message_id) WHERE message_id IS NOT NULL",
    "CREATE INDEX ix_images_pending ON images(session_id) WHERE message_id IS NULL",
]

# `mcp_resources`: the resources `/mcp resource add` read from an MCP server for a
# session, as text (untrusted input, like a tool result); one row per session, server
# and URI, adding the same one again reads it anew.
_MCP_RESOURCES = [
    """CREATE TABLE mcp_resources(
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(name) ON DELETE CASCADE ON UPDATE CASCADE,
        server TEXT NOT NULL,
        uri TEXT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        mime TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        read_at REAL NOT NULL,
        UNIQUE(session_id, server, uri)
    )""",
]

# The money spent: one row per provider call, written with its usage row and never
# moved by an edit. `usage` rows belong to a session's history, so `/session clear`,
# `/session remove` and `/trash empty` take them away; a call made is money spent all
# the same, and the day's spend (`[budget] daily_cost_limit`, `/stats` per day) is
# summed here. A usage row copied with its session (`copy_session`) is not a call and
# writes none. `usage_id` is the usage row's id (ids are never reused). The rows are
# filled from the live usage rows, a copied one once; calls already in the trash when
# the ledger is upgraded are not counted.
_SPEND_LOG = [
    """CREATE TABLE spend_log(
        usage_id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        purpose TEXT NOT NULL DEFAULT 'turn',
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        reasoning_tokens INTEGER NOT NULL DEFAULT 0,
        reported INTEGER NOT NULL DEFAULT 1,
        cost_total REAL,
        cost_saved REAL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ix_spend_log_created ON spend_log(created_at)",
    """INSERT INTO spend_log(usage_id, model, purpose, prompt_tokens, cached_tokens,
           completion_tokens, reasoning_tokens, reported, cost_total, cost_saved, created_at)
       SELECT MIN(id), model, purpose, prompt_tokens, cached_tokens, completion_tokens,
           reasoning_tokens, reported, cost_total, cost_saved, created_at
       FROM usage
       GROUP BY created_at, provider, model, prompt_tokens, completion_tokens, cached_tokens,
           reported, cost_total""",
]

# The calls of given groups of a session (the conversation's token snapshots of the
# groups it shows, `group_snapshots`): found by group, not by reading every call of the
# session (10,000 at 20,000 messages).
_USAGE_GROUP_INDEX = [
    "CREATE INDEX ix_usage_session_group ON usage(session_id, group_id, purpose)",
]

MIGRATIONS: list[list[str]] = [
    _V1,
    _V2,
    _V3,
    _MEMO_PROVENANCE,
    _EDIT_JOURNAL,
    _GROUP_LIST_INDEX,
    _VALUE_EDITS,
    _USAGE_COST,
    _CONTEXT_SOURCES,
    _MCP_RESOURCES,
    _SPEND_LOG,
    _USAGE_GROUP_INDEX,
]
SCHEMA_VERSION = len(MIGRATIONS)
