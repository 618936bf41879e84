"""A pasted image path, offered as an attachment.

A terminal delivers a file dragged from a file manager as a paste of its path,
and so does a path copied and pasted. `pasted_images(text, root)` reads a
pasted text as words the way a shell would (quotes, backslash-escaped
spaces, `file://` addresses percent-decoded) and returns the words that name
an existing file with an image extension (`images.EXTENSIONS`), each with its
place in the text. The prompt shows `ImageOffer` under the editor; taking it
runs `/image add PATH` for each image and then takes exactly those words out
of the prompt, and leaving it keeps the text as it was pasted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from textual.widgets import Static

MAX_WORDS = 64  # a paste of more words than this is text, not a list of files


@dataclass(frozen=True, slots=True)
class PastedImage:
    """A word of a pasted text that names an image: where it is in the text, the file."""

    start: int
    end: int
    path: Path
    size: int


@dataclass(frozen=True, slots=True)
class Offer:
    """What a paste offers: the pasted text, where it began in the prompt, its images,
    and the text that stays once they are attached."""

    pasted: str
    offset: int
    images: tuple[PastedImage, ...]
    rest: str

    @property
    def label(self) -> str:
        from slop_tui.images import size_text

        names = ", ".join(i.path.name for i in self.images)
        size = size_text(sum(i.size for i in self.images))
        if len(self.images) == 1:
            return f"Attach image {names} ({size})?"
        return f"Attach {len(self.images)} images: {names} ({size})?"


def words(text: str) -> list[tuple[int, int, str]]:
    """The shell-like words of `text`: (start, end, value), quotes and backslashes
    taken away (an unclosed quote runs to the end of the text)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        value: list[str] = []
        while i < n and not text[i].isspace():
            c = text[i]
            if c == "'":
                close = text.find(c, i + 1)
                close = n if close < 0 else close
                value.append(text[i + 1 : close])
                i = close + 1
            elif c == '"':
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\$`':
                        i += 1
                    value.append(text[i])
                    i += 1
                i += 1
            elif c == "\\" and i + 1 < n:
                value.append(text[i + 1])
                i += 2
            else:
                value.append(c)
                i += 1
        out.append((start, min(i, n), "".join(value)))
    return out


def _as_path(word: str, root: Path) -> Path | None:
    if word.startswith("file://"):
        url = urlparse(word)
        if url.netloc not in ("", "localhost"):
            return None
        word = unquote(url.path)
    path = Path(os.path.expanduser(word))
    return path if path.is_absolute() else root / path


def pasted_images(text: str, root: Path) -> list[PastedImage]:
    """The words of a paste that name an existing image file (see the module docstring)."""
    from slop_tui.images import EXTENSIONS

    found = []
    parts = words(text)
    if len(parts) > MAX_WORDS:
        return []
    for start, end, word in parts:
        if os.path.splitext(word)[1].lower() not in EXTENSIONS:
            continue
        path = _as_path(word, root)
        try:
            st = path.stat() if path is not None else None
        except (OSError, ValueError):
            continue
        if st is not None and path is not None and path.is_file():
            found.append(PastedImage(start, end, path, st.st_size))
    return found


def offer_for(pasted: str, offset: int, root: Path) -> Offer | None:
    """The offer a paste at `offset` of the prompt makes, or None (no image in it)."""
    images = pasted_images(pasted, root)
    return with_images(Offer(pasted, offset, (), pasted), images) if images else None


def with_images(offer: Offer, images: list[PastedImage]) -> Offer:
    """`offer` for `images` (some of its own): the text that stays without them, each
    image's word taken out with the blanks after it."""
    pasted = offer.pasted
    kept, pos = [], 0
    for image in images:
        kept.append(pasted[pos : image.start])
        pos = image.end
        while pos < len(pasted) and pasted[pos].isspace():
            pos += 1
    kept.append(pasted[pos:])
    rest = "".join(kept)
    return Offer(pasted, offer.offset, tuple(images), rest if rest.strip() else "")


def locate(offer: Offer, text: str) -> int | None:
    """Where the pasted text is in the prompt now (the place nearest to where it was
    pasted), or None once it was edited away."""
    best = None
    at = text.find(offer.pasted)
    while at >= 0:
        if best is None or abs(at - offer.offset) < abs(best - offer.offset):
            best = at
        at = text.find(offer.pasted, at + 1)
    return best


class ImageOffer(Static):
    """The one-line offer under the prompt (hidden while there is none)."""

    DEFAULT_CSS = """
    ImageOffer {
        display: none;
        height: 1;
        padding: 0 1;
        background: $panel;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    ImageOffer.-shown { display: block; }
    """
