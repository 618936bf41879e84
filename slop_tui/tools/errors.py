"""The tool failure the model reads: a leaf module every tool module may import."""

from __future__ import annotations

ERROR_PREFIX = "Error: "


class ToolError(Exception):
    """A failure reported to the model as `Error: <message>`, optionally with detail.

    `detail` is output that helps the model recover (a failing command's
    stdout/stderr); it follows the one-line message.
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail

    def body(self) -> str:
        text = ERROR_PREFIX + self.message
        return f"{text}\n{self.detail}" if self.detail else text
