"""`/image add|list|remove`: images for the next prompt.

`/image add PATH` checks the image (PNG, JPEG, WebP or GIF, at most 20 MB),
stores it once under `.slop/images/<sha256>.<ext>` and records it in the ledger
for the session's next prompt, so an image added by `slop-tui exec` goes with
the next prompt of any process.
"""

from __future__ import annotations

from pathlib import Path

from slop_tui.commands.base import (
    TABLE,
    CommandError,
    UsageError,
    command,
    no_args,
    ok,
    one_number,
)
from slop_tui.commands.continuity import _words
from slop_tui.records import Changed

CAT = "Context & history"
TABLE.default_sub["image"] = "list"


@command(
    "image",
    "add",
    "/image add PATH",
    "Attach an image (PNG, JPEG, WebP, GIF) to the next prompt.",
    CAT,
)
async def image_add(ws, args: str):
    from slop_tui.images import ImageError, check_image, image_tokens, size_text, store_image

    words = _words(args, "/image add PATH")
    if len(words) != 1:
        raise UsageError("one image path is needed. Usage: /image add PATH")
    root = Path(ws.config.project_root).resolve()
    path = Path(words[0]).expanduser()
    path = path if path.is_absolute() else root / path
    try:
        info = check_image(path)
        store_image(root, info)
    except ImageError as exc:
        raise CommandError(f"{exc}; no image was added.") from None
    except OSError as exc:
        raise CommandError(
            f"{path.name}: cannot be stored ({exc.strerror}); no image was added."
        ) from None
    ref = await ws.ledger.add_image(
        ws.session, info.sha256, path.name, info.mime, info.width, info.height, info.size
    )
    choice = await ws.provider_choice()
    tokens = image_tokens(info.width, info.height, choice.strategy)
    note = (
        "" if ws.vision(choice.model) else f" {choice.model} reads no images: switch models first."
    )
    return ok(
        f"Image {ref.id}: {path.name}, {info.width}×{info.height}, {size_text(info.size)}, "
        f"about {tokens:,} tokens; it goes with the next prompt.{note}",
        changed=Changed.FILES,
        data=ref.id,
    )


@command("image", "list", "/image list", "Images waiting for the next prompt.", CAT)
async def image_list(ws, args: str):
    no_args(args, "/image list")
    pending = await ws.ledger.pending_images(ws.session)
    if not pending:
        return ok("No image waits for the next prompt; /image add PATH adds one.", data=[])
    choice = await ws.provider_choice()
    from slop_tui.images import image_tokens, size_text

    lines = ["| # | image | size | tokens |", "|---|---|---|---|"]
    for r in pending:
        tokens = image_tokens(r.width, r.height, choice.strategy)
        name = r.name.replace("|", "\\|")
        lines.append(
            f"| {r.id} | {name} | {r.width}×{r.height}, {size_text(r.size)} | {tokens:,} |"
        )
    return ok("\n".join(lines), data=[r.id for r in pending])


@command("image", "remove", "/image remove N", "Take an image off the next prompt.", CAT)
async def image_remove(ws, args: str):
    usage = "/image remove N"
    n = one_number(args, "image number", usage)
    if not await ws.ledger.remove_pending_image(ws.session, n):
        raise CommandError(f"no image {n} waits for the next prompt; /image list shows them.")
    return ok(f"Image {n} will not go with the next prompt.", changed=Changed.FILES)
