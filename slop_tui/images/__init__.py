"""Images as context: checking and storing an image, its tokens, its bytes per provider.

- `check_image(path)`: a PNG, JPEG, WebP or GIF of at most `MAX_BYTES`, read and
  verified with Pillow; anything else is an `ImageError` with one line.
- `store_image(root, path)`: the image stored once, content-addressed, as
  `.slop/images/<sha256>.<ext>` (the ledger keeps references to it).
- `image_tokens(width, height, strategy)`: what a provider bills for it: OpenAI's
  tiles (fit in 2048², short side to 768, 85 + 170 per 512-px tile), Gemini's
  (258 when both sides are at most 384 px, else 258 per 768-px tile).
- `image_payload(path, mime, strategy)`: the bytes to send, downscaled with
  Pillow when a side is above the provider's limit (OpenAI 2048 px, Gemini 3072).
- `supports_vision(strategy, model, configured)`: whether a model reads images.

Headless; Pillow is imported when an image is first touched.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 20 * 1024 * 1024
MAX_PIXELS = 50_000_000  # larger images are refused before decoding (decompression bombs)
FORMATS = {
    "PNG": ("image/png", "png"),
    "JPEG": ("image/jpeg", "jpg"),
    "WEBP": ("image/webp", "webp"),
    "GIF": ("image/gif", "gif"),
}
EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".webp", ".gif"})
MAX_SIDE = {"openai": 2048, "gemini": 3072}
IMAGES_DIR = Path(".slop") / "images"

# Model names that read no images, by prefix (anything else is assumed to; a config's
# `[models.NAME] vision = false` says so for any other).
_NO_VISION = (
    "gpt-3.5",
    "gpt-4-0613",
    "gpt-4-32k",
    "o1-mini",
    "o3-mini",
    "text-",
    "davinci",
    "babbage",
)


class ImageError(Exception):
    """An image that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """A checked image: its bytes' digest, type, size in pixels and bytes."""

    sha256: str
    mime: str
    ext: str
    width: int
    height: int
    size: int
    data: bytes


def check_image(path: Path) -> ImageInfo:
    """The image at `path`, checked (see the module docstring)."""
    name = path.name
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ImageError(f"{name}: no such file") from None
    except OSError as exc:
        raise ImageError(f"{name}: cannot be read ({exc.strerror})") from None
    if not path.is_file():
        raise ImageError(f"{name}: not a file")
    if st.st_size > MAX_BYTES:
        raise ImageError(f"{name}: {st.st_size / 1e6:.1f} MB, larger than {MAX_BYTES / 1e6:.0f} MB")
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ImageError(f"{name}: cannot be read ({exc.strerror})") from None
    return check_bytes(name, data)


def check_bytes(name: str, data: bytes) -> ImageInfo:
    """`data` (an image file's bytes) checked like `check_image`."""
    from PIL import Image, UnidentifiedImageError

    if len(data) > MAX_BYTES:
        raise ImageError(f"{name}: larger than {MAX_BYTES / 1e6:.0f} MB")
    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt = im.format or ""
            width, height = im.size
            if fmt not in FORMATS:
                raise ImageError(
                    f"{name}: {fmt or 'this'} images are not supported (PNG, JPEG, WebP, GIF)"
                )
            if width * height > MAX_PIXELS:
                raise ImageError(f"{name}: {width}×{height} pixels, more than {MAX_PIXELS:,}")
            im.verify()
    except UnidentifiedImageError:
        raise ImageError(f"{name}: not an image Pillow can read (PNG, JPEG, WebP, GIF)") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise ImageError(f"{name}: a damaged image ({exc})") from None
    mime, ext = FORMATS[fmt]
    return ImageInfo(hashlib.sha256(data).hexdigest(), mime, ext, width, height, len(data), data)


def size_text(n: int) -> str:
    """An image's size in bytes as the commands and the conversation show it."""
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{max(1, n // 1000)} KB"


def image_path(root: Path, sha256: str, mime: str) -> Path:
    ext = next((e for m, e in FORMATS.values() if m == mime), "bin")
    return root / IMAGES_DIR / f"{sha256}.{ext}"


def store_image(root: Path, info: ImageInfo) -> Path:
    """Write the image once under `.slop/images/` (an existing copy is kept)."""
    target = image_path(root, info.sha256, info.mime)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + f".{os.getpid()}.tmp")
    tmp.write_bytes(info.data)
    os.replace(tmp, target)
    return target


def family(strategy: str) -> str:
    return "gemini" if strategy.startswith("gemini") else "openai"


def image_tokens(width: int, height: int, strategy: str) -> int:
    """Tokens a provider bills for a `width`×`height` image (see the module docstring)."""
    if width <= 0 or height <= 0:
        return 0
    if family(strategy) == "gemini":
        if width <= 384 and height <= 384:
            return 258
        return 258 * math.ceil(width / 768) * math.ceil(height / 768)
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def image_payload(path: Path, mime: str, strategy: str) -> tuple[str, bytes]:
    """(mime, bytes) to send: the stored image, downscaled when a side is above the
    provider's limit (then re-encoded as PNG, or JPEG for a JPEG)."""
    from PIL import Image

    data = path.read_bytes()
    limit = MAX_SIDE[family(strategy)]
    with Image.open(io.BytesIO(data)) as im:
        if max(im.size) <= limit:
            return mime, data
        im.thumbnail((limit, limit), Image.Resampling.LANCZOS)
        out = io.BytesIO()
        if mime == "image/jpeg":
            im.convert("RGB").save(out, "JPEG", quality=90)
            return "image/jpeg", out.getvalue()
        im.save(out, "PNG")
        return "image/png", out.getvalue()


def supports_vision(model: str, configured: object = None) -> bool:
    """Whether `model` reads images: `[models.NAME] vision` when set, else False for the
    known text-only models, True otherwise."""
    if isinstance(configured, bool):
        return configured
    name = model.lower().rsplit("/", 1)[-1]
    return not name.startswith(_NO_VISION)
