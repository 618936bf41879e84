"""The workspace's side panes and its output panel: composed after the conversation's
first frame.

`WorkspacePanes.compose` lays out the left and right panes empty, at their widths, and
the output panel without its text; `WorkspacePanes.mount_side_panes` imports this
module and mounts what it composes into them once the conversation is on screen, so
neither these widgets' modules nor their composition, styling and first layout are on
the first frame's path. The panes' sizes do not depend on their content: mounting them
moves nothing.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Static

from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
from slop_tui.ui.widgets.gauge import TokenGauge
from slop_tui.ui.widgets.groups import GroupList, SessionList
from slop_tui.ui.widgets.output import OutputMarkdown
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.sideswitch import SideSwitch

# Every widget class composed here (their bindings, for `[keymap]`).
WIDGETS = (
    SessionList,
    GroupList,
    TokenGauge,
    SideSwitch,
    StatePane,
    ScratchpadEditor,
    ContextPreview,
    OutputMarkdown,
)
GROUPS_TITLE = "Groups  ● window ◌ unsummarized Σ summary ○ out × dropped"


def left_pane() -> list[Widget]:
    """The sessions and the groups."""
    return [
        Static("Sessions", classes="pane-title"),
        SessionList(id="session-list"),
        Static(GROUPS_TITLE, classes="pane-title"),
        GroupList(id="group-list"),
    ]


def right_pane() -> list[Widget]:
    """The token gauge, the switch of a short terminal, STATE, the scratchpad and the
    context preview."""
    return [
        TokenGauge(id="gauge"),
        SideSwitch(id="side-switch"),
        Static("STATE", classes="pane-title"),
        StatePane(id="state"),
        Static("Scratchpad", classes="pane-title"),
        ScratchpadEditor(id="scratchpad"),
        Static("Context preview", classes="pane-title"),
        ContextPreview(id="preview"),
    ]


def output_text() -> OutputMarkdown:
    """A command's result, in the panel above the prompt."""
    return OutputMarkdown("", id="output-text")
