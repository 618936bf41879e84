"""Modal screens: dialogs (approval, confirm, provider, session), F1 help and history search.

Import the submodule you need (`from slop_tui.ui.screens.dialogs import
ApprovalScreen`); this package imports nothing itself, so opening one
screen does not load the others.
"""
