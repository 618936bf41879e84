"""Images: checks, content-addressed storage, token rules, downscaling, attachment to
the next prompt from any process, what each real SDK sends, and models without vision."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from PIL import Image

from slop_tui.commands import dispatch
from slop_tui.images import (
    ImageError,
    check_image,
    image_payload,
    image_tokens,
    store_image,
    supports_vision,
)
from tests.test_cli import run
from tests.workspace_fixtures import open_workspace, rough


def make_image(path: Path, size=(64, 48), fmt="PNG", color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


# -- checks -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "GIF"])
def test_supported_formats_are_read(tmp_path: Path, fmt: str) -> None:
    data = make_image(tmp_path / "a.img", fmt=fmt)
    info = check_image(tmp_path / "a.img")
    assert (info.width, info.height, info.size, info.data) == (64, 48, len(data), data)
    assert (
        info.mime
        == {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}[fmt]
    )


def test_bad_images_give_one_line(tmp_path: Path) -> None:
    make_image(tmp_path / "pic.bmp", fmt="BMP")
    (tmp_path / "notes.png").write_text("this is text, not a picture")
    good = make_image(tmp_path / "ok.png")
    (tmp_path / "cut.png").write_bytes(good[:-20])
    big = tmp_path / "big.png"
    with big.open("wb") as fh:
        fh.truncate(21 * 1024 * 1024)
    (tmp_path / "folder.png").mkdir()
    cases = {
        "missing.png": "no such file",
        "pic.bmp": "BMP images are not supported",
        "notes.png": "not an image",
        "cut.png": "damaged",
        "big.png": "larger than 21 MB",
        "folder.png": "not a file",
    }
    for name, error in cases.items():
        with pytest.raises(ImageError) as info:
            check_image(tmp_path / name)
        assert error in str(info.value) and "\n" not in str(info.value), name


def test_stored_once_by_content(tmp_path: Path) -> None:
    make_image(tmp_path / "one.png")
    make_image(tmp_path / "two.png")  # the same pixels, the same bytes
    a = store_image(tmp_path, check_image(tmp_path / "one.png"))
    b = store_image(tmp_path, check_image(tmp_path / "two.png"))
    assert a == b and a.parent == tmp_path / ".slop" / "images"
    assert len(list(a.parent.iterdir())) == 1


@pytest.mark.parametrize(
    ("size", "strategy", "tokens"),
    [
        ((1024, 1024), "openai", 765),  # 768² after scaling: 4 tiles
        ((4096, 2048), "openai", 1105),  # fit 2048×1024, then 1536×768: 6 tiles
        ((200, 100), "openai", 255),  # one tile
        ((300, 300), "gemini", 258),
        ((1000, 1000), "gemini", 1032),  # 2×2 tiles of 768 px
        ((300, 300), "gemini_gca", 258),
    ],
)
def test_each_providers_token_rule(size, strategy: str, tokens: int) -> None:
    assert image_tokens(*size, strategy) == tokens


def test_downscaled_above_the_providers_limit(tmp_path: Path) -> None:
    make_image(tmp_path / "wide.png", size=(4000, 1000))
    mime, data = image_payload(tmp_path / "wide.png", "image/png", "openai")
    with Image.open(io.BytesIO(data)) as im:
        assert mime == "image/png" and im.size == (2048, 512)
    mime, data = image_payload(tmp_path / "wide.png", "image/png", "gemini")
    with Image.open(io.BytesIO(data)) as im:
        assert im.size == (3072, 768)
    small = make_image(tmp_path / "small.jpg", fmt="JPEG")
    assert image_payload(tmp_path / "small.jpg", "image/jpeg", "openai") == ("image/jpeg", small)


def test_which_models_read_images() -> None:
    assert supports_vision("gpt-4o") and supports_vision("gemini-2.5-flash")
    assert not supports_vision("gpt-3.5-turbo")
    assert not supports_vision("my-local", False) and supports_vision("gpt-3.5-turbo", True)


# -- the next prompt ------------------------------------------------------------------------


async def test_image_waits_for_the_next_prompt_and_is_counted(tmp_path: Path) -> None:
    make_image(tmp_path / "shot.png", size=(1024, 1024))
    ws = await open_workspace(tmp_path)
    try:
        r = await dispatch(ws, "/image add shot.png")
        assert r.ok and "shot.png, 1024×1024" in r.text and "next prompt" in r.text
        bad = await dispatch(ws, "/image add nothing.png")
        assert not bad.ok and "no such file" in bad.text and "\n" not in bad.text
        assert len(await ws.ledger.pending_images(ws.session)) == 1
        user = await ws.ledger.append_user(ws.session, "what is in the picture?")
        assert await ws.ledger.pending_images(ws.session) == []
        attached = await ws.ledger.message_images([user.id])
        assert [i.name for i in attached[user.id]] == ["shot.png"]
        plan = await ws.plan(count_tokens=rough)
        (msg,) = [m for m in plan.request.messages if m.message_id == user.id]
        assert [(i.name, i.tokens) for i in msg.images] == [("shot.png", 765)]
        assert plan.layer_tokens()["history"] >= 765 + msg.tokens
        assert sum(plan.layer_tokens().values()) == plan.request_tokens
        r = await dispatch(ws, "/context show")
        assert "[image: shot.png, 1024×1024, 765 tokens]" in r.text
    finally:
        await ws.close()


async def test_image_remove_before_sending(tmp_path: Path) -> None:
    make_image(tmp_path / "a.png")
    ws = await open_workspace(tmp_path)
    try:
        r = await dispatch(ws, "/image add a.png")
        listing = await dispatch(ws, "/image list")
        assert "a.png" in listing.text
        assert (await dispatch(ws, f"/image remove {r.data}")).ok
        assert await ws.ledger.pending_images(ws.session) == []
        assert not (await dispatch(ws, f"/image remove {r.data}")).ok
    finally:
        await ws.close()


# -- the real SDKs --------------------------------------------------------------------------


def _env(fake_llm, tmp_path: Path, provider: str, model: str) -> dict[str, str]:
    base = {"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    if provider == "openai":
        return base | {
            "OPENAI_API_KEY": "x",
            "OPENAI_BASE_URL": fake_llm.openai_base_url,
            "OPENAI_MODEL": model,
        }
    return base | {
        "GEMINI_API_KEY": "x",
        "GEMINI_BASE_URL": fake_llm.gemini_base_url,
        "GEMINI_MODEL": model,
    }


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o"), ("gemini", "gemini-2.5-flash")]
)
def test_the_exact_image_part_each_provider_receives(
    tmp_path: Path, fake_llm, provider: str, model: str
) -> None:
    from tests.fakeserver import Reply

    data = make_image(tmp_path / "shot.png")
    env = _env(fake_llm, tmp_path, provider, model)
    r = run(["exec", "/image add shot.png"], tmp_path, env)  # another process adds it
    assert r.returncode == 0, r.stderr
    fake_llm.enqueue(Reply(text="a red rectangle"))
    r = run(["ask", "what is this?"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    body = fake_llm.chat_requests[-1].body
    b64 = base64.b64encode(data).decode()
    if provider == "openai":
        last = body["messages"][-1]
        assert last["role"] == "user"
        text, image = last["content"]
        assert text["type"] == "text" and text["text"].endswith("what is this?")
        assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}
    else:
        last = body["contents"][-1]
        assert last["role"] == "user"
        # google-genai sends bytes as URL-safe base64, and the Blob's fields as it has them.
        urlsafe = base64.urlsafe_b64encode(data).decode()
        assert last["parts"][-1] == {"inlineData": {"data": urlsafe, "mime_type": "image/png"}}
        assert last["parts"][-2]["text"].endswith("what is this?")
    # The next turn sends the image again with its prompt, and no image is pending.
    fake_llm.enqueue(Reply(text="yes"))
    assert run(["ask", "sure?"], tmp_path, env).returncode == 0
    sent = str(fake_llm.chat_requests[-1].body)
    assert b64 in sent or base64.urlsafe_b64encode(data).decode() in sent
    assert "No image waits" in run(["exec", "/image list"], tmp_path, env).stdout


def test_a_model_without_vision_gets_one_line_and_no_request(tmp_path: Path, fake_llm) -> None:
    make_image(tmp_path / "shot.png")
    env = _env(fake_llm, tmp_path, "openai", "gpt-3.5-turbo")
    assert run(["exec", "/image add shot.png"], tmp_path, env).returncode == 0
    before = len(fake_llm.chat_requests)
    r = run(["ask", "what is this?"], tmp_path, env)
    assert r.returncode != 0
    assert "gpt-3.5-turbo reads no images" in r.stderr + r.stdout
    assert len(fake_llm.chat_requests) == before


@pytest.mark.parametrize(
    ("provider", "model"), [("openai", "gpt-4o"), ("gemini", "gemini-2.5-flash")]
)
def test_read_file_on_an_image_returns_it_as_an_image(
    tmp_path: Path, fake_llm, provider: str, model: str
) -> None:
    from tests.fakeserver import FakeToolCall, Reply

    data = make_image(tmp_path / "diagram.png")
    (tmp_path / "broken.png").write_text("not a picture")
    env = _env(fake_llm, tmp_path, provider, model)
    fake_llm.enqueue(
        Reply(
            text="",
            tool_calls=[
                FakeToolCall("read_file", {"path": "diagram.png"}),
                FakeToolCall("read_file", {"path": "broken.png"}),
            ],
        ),
        Reply(text="a red rectangle"),
    )
    r = run(["ask", "look at the diagram"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    body = fake_llm.chat_requests[-1].body
    if provider == "openai":
        msgs = body["messages"]
        tools = [m for m in msgs if m["role"] == "tool"]
        assert "[image diagram.png: image/png, 64×48" in tools[0]["content"]
        assert "not an image" in tools[1]["content"]  # one line, the turn goes on
        after = msgs[msgs.index(tools[-1]) + 1]
        b64 = base64.b64encode(data).decode()
        assert after["role"] == "user"
        assert after["content"][0]["type"] == "text" and "read_file" in after["content"][0]["text"]
        assert after["content"][1] == {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{b64}"},
        }
        assert len(after["content"]) == 2
    else:
        contents = body["contents"]
        results = contents[-1]["parts"]
        assert [("functionResponse" in p, "inlineData" in p) for p in results] == [
            (True, False),
            (False, True),
            (True, False),
        ]
        urlsafe = base64.urlsafe_b64encode(data).decode()
        assert results[1]["inlineData"] == {"data": urlsafe, "mime_type": "image/png"}


def test_an_unreadable_image_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """Root reads any file, so the refusal the OS would give is simulated."""
    make_image(tmp_path / "locked.png")
    real_open = Path.open

    def refuse(self, *args, **kwargs):
        if self.name == "locked.png":
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    with pytest.raises(ImageError) as info:
        check_image(tmp_path / "locked.png")
    assert str(info.value) == "locked.png: cannot be read (Permission denied)"


async def test_export_keeps_the_image_references(tmp_path: Path) -> None:
    make_image(tmp_path / "shot.png", size=(30, 20))
    ws = await open_workspace(tmp_path)
    try:
        await dispatch(ws, "/image add shot.png")
        user = await ws.ledger.append_user(ws.session, "look")
        (ref,) = (await ws.ledger.message_images([user.id]))[user.id]
        r = await dispatch(ws, "/export markdown out.md")
        assert r.ok, r.text
        md = (tmp_path / "out.md").read_text()
        assert f"*Image:* shot.png, 30×20 (`.slop/images/{ref.sha256}.png`)" in md
        r = await dispatch(ws, "/export json out.json")
        import json

        doc = json.loads((tmp_path / "out.json").read_text())
        assert [(i["message_id"], i["sha256"], i["name"]) for i in doc["images"]] == [
            (user.id, ref.sha256, "shot.png")
        ]
    finally:
        await ws.close()


async def test_trash_and_redo_bring_an_image_back_with_its_message(tmp_path: Path) -> None:
    make_image(tmp_path / "shot.png", size=(30, 20))
    ws = await open_workspace(tmp_path)
    try:
        await dispatch(ws, "/image add shot.png")
        user = await ws.ledger.append_user(ws.session, "look")
        assert (await dispatch(ws, f"/message remove {user.group_id}")).ok
        plan = await ws.plan(count_tokens=rough)
        assert not [m for m in plan.request.messages if m.images]
        assert (await dispatch(ws, "/redo")).ok
        plan = await ws.plan(count_tokens=rough)
        (msg,) = [m for m in plan.request.messages if m.images]
        assert msg.message_id == user.id and msg.images[0].name == "shot.png"
    finally:
        await ws.close()


def test_an_image_follows_a_provider_switch_in_the_new_form(tmp_path: Path, fake_llm) -> None:
    from tests.fakeserver import Reply

    data = make_image(tmp_path / "shot.png")
    env = _env(fake_llm, tmp_path, "openai", "gpt-4o") | _env(
        fake_llm, tmp_path, "gemini", "gemini-2.5-flash"
    )
    assert run(["exec", "/provider openai"], tmp_path, env).returncode == 0
    assert run(["exec", "/image add shot.png"], tmp_path, env).returncode == 0
    fake_llm.enqueue(Reply(text="red"))
    assert run(["ask", "what is this?"], tmp_path, env).returncode == 0
    assert "image_url" in str(fake_llm.chat_requests[-1].body)
    r = run(["exec", "/provider gemini"], tmp_path, env)
    assert r.returncode == 0, r.stderr
    fake_llm.enqueue(Reply(text="still red"))
    assert run(["ask", "and now?"], tmp_path, env).returncode == 0
    req = fake_llm.chat_requests[-1]
    assert req.provider == "gemini"
    sent = str(req.body)
    assert base64.urlsafe_b64encode(data).decode() in sent and "image_url" not in sent


# -- in the TUI --------------------------------------------------------------------------


async def test_an_attached_image_is_a_chip_with_name_size_and_tokens(
    tmp_path: Path, monkeypatch
) -> None:
    from slop_tui.ui.app import SlopApp
    from slop_tui.ui.widgets.image_chip import ImageChip, graphics
    from tests.fakeserver import wait_for
    from tests.test_app import started

    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    data = make_image(tmp_path / "shot.png", size=(1024, 1024))
    app = SlopApp(db=str(tmp_path / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press(*"/image add shot.png", "enter")
        await wait_for(pilot, lambda: app.query_one("#prompt").text == "")
        await pilot.press(*"what is this?", "enter")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=60
        )
        await wait_for(pilot, lambda: bool(app.query(ImageChip)))
        (chip,) = app.query(ImageChip)
        label = str(chip.label.render())
        size = f"{max(1, len(data) // 1000)} KB"
        assert label == f"▣ shot.png · 1024×1024 · {size} · 765 tokens", label
        assert chip.region.height >= 1  # on screen, in the group
        group = chip.parent
        assert group is not None and group.prompt == "what is this?"
        # No pixels in a test terminal: the chip alone.
        assert not graphics() and not chip.query(".image-thumb")
        # The group shown again from the ledger (another session and back) keeps it.
        await pilot.press(*"/session activate other", "enter")
        await wait_for(pilot, lambda: not app.query(ImageChip))
        await pilot.press(*"/session activate default_session", "enter")
        await wait_for(pilot, lambda: bool(app.query(ImageChip)))
        assert str(app.query_one(ImageChip).label.render()) == label


def test_the_chip_names_the_providers_tokens_and_knows_pixel_terminals() -> None:
    from slop_tui.records import ImageRef
    from slop_tui.ui.widgets.image_chip import _named_pixel_terminal, chip_text

    ref = ImageRef(1, "s", 2, "ab", "a\x1b[2Jb.png", "image/png", 1024, 1024, 2_500_000, 0.0)
    assert chip_text(ref, "openai") == "▣ a␛[2Jb.png · 1024×1024 · 2.5 MB · 765 tokens"
    assert chip_text(ref, "gemini").endswith(f"· {image_tokens(1024, 1024, 'gemini'):,} tokens")
    assert _named_pixel_terminal({"TERM": "xterm-kitty"})
    assert _named_pixel_terminal({"TERM_PROGRAM": "WezTerm"})
    assert not _named_pixel_terminal({"TERM": "xterm-256color", "TERM_PROGRAM": "tmux"})
    assert not _named_pixel_terminal({"TERM": "xterm-kitty", "SLOP_TUI_IMAGES": "off"})


async def test_the_images_are_dropped_and_restored_as_a_layer(tmp_path: Path) -> None:
    make_image(tmp_path / "shot.png", size=(1024, 1024))
    ws = await open_workspace(tmp_path)
    try:
        await dispatch(ws, "/image add shot.png")
        user = await ws.ledger.append_user(ws.session, "what is in the picture?")
        r = await dispatch(ws, "/context drop images")
        assert r.ok and "Dropped the images" in r.text
        plan = await ws.plan(count_tokens=rough)
        (msg,) = [m for m in plan.request.messages if m.message_id == user.id]
        assert msg.images == () and "layer images dropped" in " ".join(plan.request.notes)
        assert (await ws.ledger.message_images([user.id]))[user.id]  # kept
        assert (await dispatch(ws, "/context restore images")).ok
        plan = await ws.plan(count_tokens=rough)
        (msg,) = [m for m in plan.request.messages if m.message_id == user.id]
        assert [i.tokens for i in msg.images] == [765]
    finally:
        await ws.close()
