"""The fast builders of frozen slots dataclasses give what the constructors give."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field, replace

import pytest

from slop_tui.context.prompt import PromptMessage
from slop_tui.records import Message, ToolCall
from slop_tui.slotted import positional_builder

MESSAGE_ROW = (7, "s", 3, "main", "tool", "out", "error", None, "c1", "grep", "openai", 4, 1.5)


def test_a_built_message_is_a_real_frozen_message() -> None:
    build = positional_builder(Message)
    msg = build(*MESSAGE_ROW)
    assert type(msg) is Message and msg == Message(*MESSAGE_ROW)
    assert hash(msg) == hash(Message(*MESSAGE_ROW))
    assert repr(msg) == repr(Message(*MESSAGE_ROW))
    assert msg.is_tool_related and msg.tool_name == "grep"
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.content = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del msg.content  # type: ignore[misc]
    assert replace(msg, content="y") == Message(*MESSAGE_ROW[:5], "y", *MESSAGE_ROW[6:])
    assert pickle.loads(pickle.dumps(msg)) == msg
    assert copy.deepcopy(msg) == msg
    assert dataclasses.asdict(msg)["content"] == "out"


def test_a_built_prompt_message_equals_the_constructed_one() -> None:
    build = positional_builder(PromptMessage)
    call = ToolCall("c1", "read_file", {"path": "a"})
    values = ("assistant", "t", 3, 1, 2, (call,), None, None, {"k": 1}, False, None, None, ())
    m = build(*values)
    assert type(m) is PromptMessage
    assert m == PromptMessage(
        role="assistant",
        text="t",
        tokens=3,
        message_id=1,
        group_id=2,
        tool_calls=(call,),
        native={"k": 1},
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.text = "x"  # type: ignore[misc]


@pytest.mark.parametrize("width", [12, 14, 0])
def test_a_row_of_the_wrong_width_is_refused(width: int) -> None:
    build = positional_builder(Message)
    with pytest.raises(TypeError):
        build(*(1,) * width)


@dataclass
class _Mutable:
    x: int


@dataclass(frozen=True)
class _NoSlots:
    x: int


@dataclass(frozen=True, slots=True)
class _Factory:
    x: list = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _PostInit:
    x: int

    def __post_init__(self) -> None:
        if self.x < 0:  # the check a builder would silently skip
            raise ValueError("x must not be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class _KeywordOnly:
    x: int


@dataclass(frozen=True, slots=True)
class _Empty:
    pass


@dataclass(frozen=True, slots=True)
class _Base:
    x: int


@dataclass(frozen=True, slots=True)
class _Derived(_Base):
    y: int


@dataclass(frozen=True, slots=True)
class _Reserved:
    _obj: int


@pytest.mark.parametrize(
    "cls", [_Mutable, _NoSlots, _PostInit, _KeywordOnly, _Empty, _Derived, _Reserved, int]
)
def test_unsupported_classes_are_refused(cls: type) -> None:
    with pytest.raises(TypeError):
        positional_builder(cls)


def test_a_factory_field_is_just_a_value_to_the_builder() -> None:
    build = positional_builder(_Factory)
    assert build([1]) == _Factory([1])
