"""The Textual workspace. Only this package imports Textual."""
