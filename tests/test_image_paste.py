"""A pasted image path offers `/image add`: each form of path a terminal pastes, several
paths, what is not an image, accepting and declining, and what the model receives."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

import pytest
from textual import events

from slop_tui.ui.app import SlopApp
from tests.fakeserver import Reply, wait_for
from tests.test_app import started
from tests.test_images import make_image


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _app(project: Path) -> SlopApp:
    return SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)


async def _paste(pilot, text: str) -> None:
    pilot.app.post_message(events.Paste(text))
    await pilot.pause()
    await pilot.pause()


def _offer(app) -> str:
    line = app.query_one("#prompt-image-offer")
    return str(line.render()) if line.has_class("-shown") else ""


async def _pending(app) -> list[str]:
    ws = app.workspace
    return [r.name for r in await ws.ledger.pending_images(ws.session)]


async def test_each_form_of_pasted_path_offers_the_image_and_attaches_it(project: Path) -> None:
    """Plain, quoted, backslash-escaped, `file://` and relative: each is offered, and
    ctrl+t attaches it as `/image add` does and takes exactly the path out of the prompt."""
    folder = project / "my shots"
    folder.mkdir()
    formats = {"jpg": "JPEG", "webp": "WEBP", "gif": "GIF"}
    names = ("single q.jpg", "double q.webp", "escaped one.gif", "url %.png")
    for i, name in enumerate(names):
        kind = formats.get(name.rsplit(".", 1)[1], "PNG")
        make_image(folder / name, fmt=kind, color=(10 * i, 20, 30))
    make_image(project / "plain.png", color=(1, 2, 3))
    make_image(project / "rel.PNG", color=(4, 5, 6))
    forms = [
        (str(project / "plain.png"), "plain.png"),
        (f"'{folder / 'single q.jpg'}'", "single q.jpg"),
        (f'"{folder / "double q.webp"}"', "double q.webp"),
        (str(folder / "escaped one.gif").replace(" ", "\\ ") + " ", "escaped one.gif"),
        ("file://" + quote(str(folder / "url %.png")), "url %.png"),
        ("rel.PNG\n", "rel.PNG"),
    ]
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        prompt = app.query_one("#prompt")
        for n, (pasted, name) in enumerate(forms, 1):
            await pilot.press(*"look at ")
            await _paste(pilot, pasted)
            await pilot.press(*" please")
            assert prompt.text == f"look at {pasted} please"
            offer = _offer(app)
            assert offer.startswith(f"Attach image {name} (") and "ctrl+t attaches" in offer
            await pilot.press("ctrl+t")
            await wait_for(pilot, lambda: prompt.text == "look at  please")
            assert not _offer(app)
            assert (await _pending(app))[-1] == name and len(await _pending(app)) == n
            prompt.clear()
        # Stored as `/image add` stores it: once, by content, under .slop/images/.
        assert len(list((project / ".slop" / "images").iterdir())) == len(forms)


async def test_several_pasted_paths_are_one_offer_and_other_words_stay(project: Path) -> None:
    make_image(project / "a.png")
    make_image(project / "b c.png", color=(0, 0, 255))
    (project / "notes.txt").write_text("not an image")
    pasted = f"{project / 'a.png'}\n'{project / 'b c.png'}' {project / 'notes.txt'}"
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await _paste(pilot, pasted)
        assert _offer(app).startswith("Attach 2 images: a.png, b c.png (")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: not _offer(app))
        await wait_for(pilot, lambda: app.query_one("#prompt").text == str(project / "notes.txt"))
        assert await _pending(app) == ["a.png", "b c.png"]


@pytest.mark.parametrize(
    "pasted",
    ["{root}/notes.txt", "{root}/missing.png", "{root}/folder.png", "'{root}/fake.bmp'", "a.png"],
    ids=["text file", "missing", "a folder", "other extension", "relative, missing"],
)
async def test_what_names_no_image_is_left_as_text_with_no_offer(
    project: Path, pasted: str
) -> None:
    (project / "notes.txt").write_text("words")
    (project / "folder.png").mkdir()
    make_image(project / "fake.bmp", fmt="BMP")
    text = pasted.format(root=project)
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await _paste(pilot, text)
        assert app.query_one("#prompt").text == text
        assert not _offer(app)
        await pilot.press("ctrl+t")  # nothing offered: nothing happens
        await pilot.pause()
        assert app.query_one("#prompt").text == text and await _pending(app) == []


async def test_declining_keeps_the_text_and_typing_never_attaches(project: Path) -> None:
    make_image(project / "shot.png")
    pasted = str(project / "shot.png")
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        prompt = app.query_one("#prompt")
        await _paste(pilot, pasted)
        assert _offer(app)
        # Typed text goes on into the prompt; the offer stays for ctrl+t.
        await pilot.press(*" y t enter? no: shift", "space")
        assert prompt.text == pasted + " y t enter? no: shift "
        assert _offer(app) and await _pending(app) == []
        await pilot.press("escape")
        assert not _offer(app)
        assert prompt.text == pasted + " y t enter? no: shift "
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert await _pending(app) == [] and prompt.text == pasted + " y t enter? no: shift "
        # Editing the pasted path away withdraws the offer.
        prompt.clear()
        await _paste(pilot, pasted)
        assert _offer(app)
        await pilot.press("backspace")
        assert not _offer(app) and await _pending(app) == []
        # A path pasted into a command being typed is the command's argument.
        prompt.clear()
        await pilot.press(*"/image add ")
        await _paste(pilot, pasted)
        assert prompt.text == "/image add " + pasted and not _offer(app)


async def test_an_attached_paste_goes_with_the_next_prompt_as_image_add_sends_it(
    project: Path, fake_llm, monkeypatch
) -> None:
    """What the fake server receives through the real openai SDK: the pasted image as a
    data-URI part of the next prompt, and Enter on a declined paste sends its text."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    data = make_image(project / "shot.png")
    fake_llm.enqueue(Reply(text="a red rectangle"), Reply(text="a path"))
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await _paste(pilot, f"'{project / 'shot.png'}'")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.query_one("#prompt").text == "")
        await pilot.press(*"what is this?", "enter")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 1, timeout=30)
        await wait_for(pilot, lambda: not app.turns.busy, timeout=30)
        last = fake_llm.chat_requests[-1].body["messages"][-1]
        b64 = base64.b64encode(data).decode()
        text, image = last["content"]
        assert text["type"] == "text" and text["text"].endswith("what is this?")
        assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}}
        # Enter sends a pasted path the user did not attach as the text it is.
        await pilot.press(*"see ")
        await _paste(pilot, str(project / "shot.png"))
        assert _offer(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 2, timeout=30)
        await wait_for(pilot, lambda: not app.turns.busy, timeout=30)
        sent = fake_llm.chat_requests[-1].body["messages"][-1]
        assert sent["role"] == "user" and str(project / "shot.png") in str(sent["content"])
        assert "image_url" not in str(sent["content"]) and not _offer(app)


async def test_a_path_pasted_on_another_pane_lands_in_the_prompt_with_the_offer(
    project: Path,
) -> None:
    make_image(project / "shot.png")
    app = _app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("f3")  # the group list has the keyboard
        await pilot.pause()
        assert app.focused is not None and app.focused.id != "prompt-area"
        await _paste(pilot, str(project / "shot.png"))
        assert app.query_one("#prompt").text == str(project / "shot.png")
        assert _offer(app).startswith("Attach image shot.png")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: app.query_one("#prompt").text == "")
        assert await _pending(app) == ["shot.png"]


def test_words_are_read_as_a_shell_reads_them() -> None:
    from slop_tui.ui.widgets.image_paste import words

    text = """a\\ b 'c d' "e \\"f\\" g" h'i j'k 'open"""
    assert [w for _s, _e, w in words(text)] == ["a b", "c d", 'e "f" g', "hi jk", "open"]
    assert [(s, e) for s, e, _w in words(text)][:2] == [(0, 4), (5, 10)]
