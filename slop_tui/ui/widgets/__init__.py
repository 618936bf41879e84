"""Workspace widgets: each renders headless state and posts intents as Textual messages.

Import the modules directly (``from slop_tui.ui.widgets.groups import GroupList``);
this package deliberately imports nothing so a pane's module loads only when used.
"""
