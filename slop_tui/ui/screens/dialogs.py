"""Modal dialogs: tool approval, confirmation, provider/model and session switching.

Every button has a key, Escape cancels, and everything a model or a user
typed is shown as plain text (markup off, control characters made visible),
so a tool argument cannot restyle or hide part of the dialog that asks
whether to run it.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Collection, Mapping, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from slop_tui.context.plan import LABEL_OTHER_PROVIDER
from slop_tui.records import SessionSummary
from slop_tui.ui.screens.base import (
    ArmedDialog,
    Arming,
    Dialog,
    DialogBox,
    PickList,
    neutralise,
    option_row,
    plain,
)

# name, kind, model, endpoint
ProviderRow = tuple[str, str, str, str]
SessionAction = tuple[str, str]  # ("switch" | "new" | "clone" | "remove", session name)


def list_keys(list_id: str) -> list[Binding]:
    """A dialog's text field has the focus; these keys move the highlight of its
    list meanwhile (the field does not use them)."""
    moves = (("up", "cursor_up"), ("down", "cursor_down"), ("pageup", "page_up"))
    moves += (("pagedown", "page_down"),)
    return [
        Binding(key, f"list_move('{list_id}', '{action}')", show=False) for key, action in moves
    ]


# -- approval ---------------------------------------------------------------------

NO_SESSION_OPTION = (
    "There is no shell sandbox here, so every shell command asks: "
    "'always this session' is not offered."
)


class ApprovalScreen(ArmedDialog[str]):
    """Allow once / always for this session / deny, for a writing tool or the shell.

    Dismisses with "allow", "allow_session" or "deny" (d and Escape deny).
    The dialog opens while the user may be typing, so the allow keys only
    work `arm_delay` seconds after it appears: a typed "a" or "s" cannot
    approve a command nobody has read. Deny keys and the buttons work at once.
    `session_option=False` leaves out "always this session" (button and key)
    where it would not apply: the shell without a sandbox asks every time.
    """

    DEFAULT_CSS = """
    ApprovalScreen > #dialog { border: thick $warning; width: 100; }
    ApprovalScreen #arguments { height: auto; max-height: 20; border: round $panel; }
    ApprovalScreen #approval-hint { color: $text-muted; height: auto; }
    """
    AUTO_FOCUS = "#arguments"
    BINDINGS = [
        Binding("a", "choose('allow')", "Allow once", id="approval_allow"),
        Binding("s", "choose('allow_session')", "Always this session", id="approval_allow_session"),
        Binding("d", "choose('deny')", "Deny", id="approval_deny"),
        Binding("escape", "choose('deny')", "Deny", show=False, id="approval_cancel"),
    ]
    ANSWERS = ("allow", "allow_session", "deny")

    def __init__(
        self,
        tool_name: str,
        arguments_text: str,
        *,
        arm_delay: float = 0.5,
        session_option: bool = True,
    ) -> None:
        super().__init__()
        self.tool_name = tool_name
        self.arguments_text = arguments_text
        self.arming = Arming(arm_delay)
        self.session_option = session_option

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            title = Text("The model wants to run ")
            title.append_text(plain(self.tool_name, "bold"))
            yield Static(title, classes="dialog-title", id="approval-title")
            with VerticalScroll(id="arguments"):
                yield Static(plain(self.arguments_text or "(no arguments)"), id="arguments-text")
            hint = "" if self.session_option else NO_SESSION_OPTION
            yield Static(hint, id="approval-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Allow once (a)", id="allow", variant="primary")
                if self.session_option:
                    yield Button("Always this session (s)", id="allow_session")
                yield Button("Deny (d)", id="deny", variant="error")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "choose" and parameters == ("allow_session",):
            return self.session_option
        return True

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self._finish(event.button.id or "deny")

    def action_choose(self, answer: str) -> None:
        if answer != "deny" and not self.arming.ready():
            self.query_one("#approval-hint", Static).update(
                "That key came before the dialog was readable and was ignored; press it again."
            )
            return
        self._finish(answer)

    def _finish(self, answer: str) -> None:
        if answer == "allow_session" and not self.session_option:
            return
        self.dismiss(answer if answer in self.ANSWERS else "deny")


# -- confirm ----------------------------------------------------------------------


class ConfirmScreen(ArmedDialog[bool]):
    """A yes/no question; True only for Yes (y). No (n) and Escape give False.

    Like the approval dialog, `y` only works `arm_delay` seconds after the dialog
    appears: a sentence being typed when it opened cannot answer it ("ready"
    must not confirm with its `y`). The buttons, `n` and Escape work at once.
    """

    DEFAULT_CSS = """
    ConfirmScreen > #dialog { border: thick $error; width: 64; }
    ConfirmScreen #confirm-hint { color: $text-muted; height: auto; }
    """
    AUTO_FOCUS = "#no"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm_yes"),
        Binding("n", "answer(False)", "No", id="confirm_no"),
        Binding("escape", "answer(False)", "Cancel", show=False, id="confirm_cancel"),
    ]

    def __init__(
        self,
        title: str,
        body: str = "",
        *,
        yes: str = "Yes",
        no: str = "No",
        arm_delay: float = 0.5,
    ) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.yes_label = yes
        self.no_label = no
        self.arming = Arming(arm_delay)

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            yield Static(plain(self.title_text), classes="dialog-title")
            if self.body:
                yield Static(plain(self.body))
            yield Static("", id="confirm-hint")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.yes_label} (y)", id="yes", variant="error")
                yield Button(f"{self.no_label} (n)", id="no")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        if yes and not self.arming.ready():
            self.query_one("#confirm-hint", Static).update(
                "That key came before the question was readable and was ignored; press it again."
            )
            return
        self.dismiss(bool(yes))


# -- provider and model -------------------------------------------------------------


def hidden_notice(name: str, count: int) -> str:
    if count <= 0:
        return f"Every message in the window will be sent to {name}."
    noun = "tool message" if count == 1 else "tool messages"
    return (
        f"{count} {noun} in the window will not be sent to {name} "
        "(made by another provider family; their text answers still are)."
    )


class ProviderScreen(Dialog[tuple[str, str] | None]):
    """Pick a configured provider and a model; dismisses with (name, model) or None.

    `choices` are (name, kind, default model, endpoint); `hidden_counts` maps a
    provider to how many tool messages in the window it would not see. The
    model field has the focus (a dialog opens on its text field, so typing is
    never taken for a command); ↑/↓ choose the provider, Enter (or a double
    click) switches, `m` in the list edits the model, Escape cancels.
    """

    DEFAULT_CSS = """
    ProviderScreen > #dialog { width: 104; }
    """
    AUTO_FOCUS = "#model"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", show=False, id="provider_cancel"),
        Binding("m", "focus_model", "Edit model", id="provider_model"),
        *list_keys("providers"),
    ]

    def __init__(
        self,
        choices: Sequence[ProviderRow],
        current: str,
        hidden_counts: Mapping[str, int] | None = None,
        keyless: Collection[str] = (),
    ) -> None:
        super().__init__()
        self.choices = list(choices)
        self.current = current
        self.hidden_counts = dict(hidden_counts or {})
        # Providers without a usable key: marked in the list, said before a switch.
        self.keyless = frozenset(keyless)

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            yield Static("Provider and model", classes="dialog-title")
            yield PickList(*[self._option(row) for row in self.choices], id="providers")
            with Horizontal(classes="dialog-field"):
                yield Static("Model", classes="dialog-label")
                yield Input(id="model", placeholder="model name")
            yield Static("", id="notice", classes="dialog-notice")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Switch (enter)", id="switch", variant="primary")
                yield Button("Cancel (esc)", id="cancel")

    def _option(self, row: ProviderRow) -> Option:
        name, kind, model, endpoint = row
        line = option_row(name == self.current)
        line.append_text(plain(f"{name:<14}", "bold"))
        line.append_text(plain(f" {kind:<11} {model:<28} "))
        line.append_text(plain(endpoint or "default", "dim"))
        if name in self.keyless:
            line.append(" · ")
            line.append_text(plain("no key", "bold red"))
        return Option(line, id=name)

    def on_mount(self) -> None:
        names = [row[0] for row in self.choices]
        picker = self.query_one("#providers", PickList)
        if names:
            picker.highlighted = names.index(self.current) if self.current in names else 0
            self._show(picker.highlighted or 0)

    @property
    def highlighted_name(self) -> str | None:
        index = self.query_one("#providers", PickList).highlighted
        return self.choices[index][0] if index is not None and self.choices else None

    def _show(self, index: int) -> None:
        name, _kind, model, _endpoint = self.choices[index]
        field = self.query_one("#model", Input)
        field.value = model
        field.cursor_position = len(model)  # typing goes on at the end
        count = self.hidden_counts.get(name, 0)
        notice = hidden_notice(name, count)
        if name in self.keyless:
            notice = (
                f"{name} has no API key: a switch is kept, but the next send fails until "
                "its key is set (docs/configuration.md)." + (f"\n{notice}" if notice else "")
            )
        self.query_one("#notice", Static).update(plain(notice))

    @on(OptionList.OptionHighlighted, "#providers")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show(event.option_index)

    @on(OptionList.OptionSelected, "#providers")
    @on(Input.Submitted, "#model")
    def _chosen(self) -> None:
        self.action_switch()

    @on(Button.Pressed, "#switch")
    def _switch_pressed(self) -> None:
        self.action_switch()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    def action_switch(self) -> None:
        name = self.highlighted_name
        if name is None:
            self.dismiss(None)
            return
        default = next(row[2] for row in self.choices if row[0] == name)
        model = self.query_one("#model", Input).value.strip() or default
        self.dismiss((name, model))

    def action_focus_model(self) -> None:
        self.query_one("#model", Input).focus()

    def action_list_move(self, list_id: str, action: str) -> None:
        getattr(self.query_one(f"#{list_id}", PickList), f"action_{action}")()

    def action_cancel(self) -> None:
        self.dismiss(None)


async def provider_dialog_args(ws) -> tuple[list[ProviderRow], str, dict[str, int]]:
    """(choices, current, hidden_counts) for ProviderScreen from a Workspace: how many
    rows of the next request each provider would not see, from the plan built for
    that provider's strategy."""
    from slop_tui.providers.config import strategy_of

    configs = ws.provider_configs()
    choice = await ws.provider_choice()
    rows: list[ProviderRow] = []
    hidden: dict[str, int] = {}
    by_strategy: dict[str, int] = {}
    for cfg in configs.values():
        model = choice.model if cfg.name == choice.name else cfg.model
        rows.append((cfg.name, cfg.kind, model, cfg.base_url or "default"))
        strategy = strategy_of(cfg.kind)
        if strategy not in by_strategy:
            plan, _ = await ws.display_plan(strategy)
            by_strategy[strategy] = sum(
                1 for label in plan.messages.values() if label == LABEL_OTHER_PROVIDER
            )
        hidden[cfg.name] = by_strategy[strategy]
    return rows, choice.name, hidden


def keyless_providers(ws) -> list[str]:
    """The configured providers without a usable key (the provider dialog marks them)."""
    return [name for name, cfg in ws.provider_configs().items() if not cfg.has_key]


# -- sessions -----------------------------------------------------------------------


_now = time.time  # the clock the session dialog's dates are relative to


def _when(ts: float) -> str:
    """When a session was last used, in at most 10 columns (the first prompt keeps the
    rest of the row at 80 columns): the time today, the day this year, else the date."""
    if not ts:
        return "-"
    then = _dt.datetime.fromtimestamp(ts)
    today = _dt.datetime.fromtimestamp(_now())
    if then.date() == today.date():
        return then.strftime("%H:%M")
    if then.year == today.year:
        return then.strftime("%b %d")
    return then.strftime("%Y-%m-%d")


class SessionScreen(Dialog[SessionAction | None]):
    """Switch (enter), new (ctrl+n), clone the current session (ctrl+l) or move one to
    the trash (ctrl+t, confirmed).

    The Name field has the focus when the dialog opens, so a name typed at once
    ("ready") lands there and no letter is a command; ↑/↓ and the page keys move
    the highlight in the list meanwhile. Enter with an empty field switches to
    the highlighted session, with a new name creates it (a name that exists
    switches to it). Dismisses with ("switch" | "new" | "clone" | "remove",
    name) or None.
    """

    DEFAULT_CSS = """
    SessionScreen > #dialog { width: 104; }
    """
    AUTO_FOCUS = "#name"
    BINDINGS = [
        Binding("ctrl+n", "new", "New", id="session_new"),
        Binding("ctrl+l", "clone", "Clone", id="session_clone"),
        Binding("ctrl+t", "remove", "To trash", id="session_remove"),
        Binding("escape", "cancel", "Cancel", show=False, id="session_cancel"),
        *list_keys("sessions"),
    ]

    def __init__(self, sessions: Sequence[SessionSummary], current: str) -> None:
        super().__init__()
        self.sessions = list(sessions)
        self.current = current
        if current not in {s.name for s in self.sessions}:
            self.sessions.insert(0, SessionSummary(current, 0, 0, 0, 0.0, "(not written yet)"))
        self.mode = "new"

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.sessions]

    def compose(self) -> ComposeResult:
        with DialogBox(id="dialog"):
            yield Static("Sessions", classes="dialog-title")
            yield PickList(*[self._option(s) for s in self.sessions], id="sessions")
            with Horizontal(classes="dialog-field"):
                yield Static("Name", classes="dialog-label")
                yield Input(id="name", placeholder="name for a new session or a clone of this one")
            yield Static("", id="error", classes="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                # Short labels: the five fit the dialog at 80 columns.
                yield Button("Switch ⏎", id="switch", variant="primary")
                yield Button("New ^n", id="new")
                yield Button("Clone ^l", id="clone")
                yield Button("Trash ^t", id="remove", variant="error")
                yield Button("Cancel esc", id="cancel")

    def _option(self, s: SessionSummary) -> Option:
        line = option_row(s.name == self.current)
        # Compact columns: at 80 columns the first prompt keeps a readable share.
        line.append_text(plain(s.name[:18].ljust(18), "bold"))
        line.append(f" {s.groups:>4} gr {s.tokens:>7,} tok {_when(s.last_used):>6}  ", style="dim")
        line.append_text(plain(s.preview))
        return Option(line, id=s.name)

    def on_mount(self) -> None:
        self.query_one("#sessions", PickList).highlighted = self.names.index(self.current)

    @property
    def highlighted_name(self) -> str | None:
        index = self.query_one("#sessions", PickList).highlighted
        return self.sessions[index].name if index is not None else None

    def _error(self, text: str) -> None:
        self.query_one("#error", Static).update(plain(text))

    def _typed_name(self) -> str:
        return self.query_one("#name", Input).value.strip()

    @on(OptionList.OptionSelected, "#sessions")
    def _selected(self) -> None:
        self.action_switch()

    @on(Input.Submitted, "#name")
    def _submitted(self) -> None:
        name = self._typed_name()
        if not name:
            self.action_switch()
        elif name in self.names:
            self.dismiss(("switch", name))
        else:
            self._create(self.mode)

    def action_list_move(self, list_id: str, action: str) -> None:
        getattr(self.query_one(f"#{list_id}", PickList), f"action_{action}")()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        action = getattr(self, f"action_{event.button.id}", None)
        if action is not None:
            action()

    def action_switch(self) -> None:
        name = self.highlighted_name
        if name is not None:
            self.dismiss(("switch", name))

    def action_new(self) -> None:
        self._create("new")

    def action_clone(self) -> None:
        self._create("clone")

    def _create(self, mode: str) -> None:
        self.mode = mode
        name = self._typed_name()
        field = self.query_one("#name", Input)
        if not name:
            what = "new session" if mode == "new" else f"copy of '{self.current}'"
            self._error(f"Type a name for the {what}, then press Enter.")
            field.focus()
            return
        if name in self.names:
            self._error(f"Session '{name}' already exists; pick another name.")
            field.focus()
            return
        self.dismiss((mode, name))

    def action_remove(self) -> None:
        name = self.highlighted_name
        if name is None:
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(("remove", name))

        self.app.push_screen(
            ConfirmScreen(
                f"Move session '{name}' to the trash?",
                "Its messages, STATE, usage and scratchpad go with it; ctrl+y or "
                "/trash restore brings it back.",
                yes="To trash",
                no="Keep",
            ),
            answered,
        )

    def action_cancel(self) -> None:
        self.dismiss(None)


__all__ = [
    "ApprovalScreen",
    "ConfirmScreen",
    "Dialog",
    "PickList",
    "ProviderRow",
    "ProviderScreen",
    "SessionScreen",
    "hidden_notice",
    "neutralise",
    "plain",
    "provider_dialog_args",
    "keyless_providers",
]
