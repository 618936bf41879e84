"""Provider and model switching at runtime."""

from __future__ import annotations

from slop_tui.commands.base import CommandError, CommandResult, UsageError, command, ok, split_first
from slop_tui.records import Changed, strategy_family

CAT = "Models & tools"


async def _hidden_tool_messages(ws, strategy: str) -> int:
    """How many tool messages in the window the target provider will not see."""
    sess = await ws.current()
    window = await ws.ledger.window(ws.session, sess.window_size, lane=sess.lane)
    return sum(
        1
        for m in window
        if m.is_tool_related and strategy_family(m.strategy) != strategy_family(strategy)
    )


@command(
    "provider",
    None,
    "/provider [NAME [MODEL]]",
    "Show the providers, or switch this session to NAME (and MODEL).",
    CAT,
)
async def provider(ws, args: str) -> CommandResult:
    configs = ws.provider_configs()
    name, model = split_first(args)
    if not name:
        choice = await ws.provider_choice()
        lines = ["| | provider | kind | model | endpoint |", "|---|---|---|---|---|"]
        for cfg in configs.values():
            mark = "✓" if cfg.name == choice.name else ""
            lines.append(
                f"| {mark} | {cfg.name} | {cfg.kind} | {cfg.model} | {cfg.base_url or 'default'} |"
            )
        return ok("\n".join(lines), data=list(configs))
    if name not in configs:
        raise CommandError(f"there is no provider '{name}'; configured: {', '.join(configs)}.")
    cfg = configs[name]
    model = model.strip() or cfg.model
    await ws.ledger.set_provider(ws.session, name, model)
    choice = await ws.provider_choice()
    hidden = await _hidden_tool_messages(ws, choice.strategy)
    note = (
        (
            f" {hidden} tool message(s) in the window were made by another provider and will "
            "not be sent; their text answers still are."
        )
        if hidden
        else ""
    )
    return ok(
        f"Provider {name} ({model}) for session '{ws.session}'.{note}", changed=Changed.PROVIDER
    )


@command("model", None, "/model [NAME]", "Show or set the model of the current provider.", CAT)
async def model(ws, args: str) -> CommandResult:
    choice = await ws.provider_choice()
    name = args.strip()
    if not name:
        return ok(f"Model: {choice.model} (provider {choice.name}).")
    if any(c.isspace() for c in name):
        raise UsageError("a model name has no spaces. Usage: /model [NAME]")
    await ws.ledger.set_provider(ws.session, choice.name, name)
    return ok(f"Model {name} on provider {choice.name}.", changed=Changed.PROVIDER)


@command("models", None, "/models [FILTER]", "List the current provider's models.", CAT)
async def models(ws, args: str) -> CommandResult:
    from slop_tui.providers import ProviderError, create_provider

    choice = await ws.provider_choice()
    provider_obj = create_provider(ws.provider_configs()[choice.name])
    try:
        names = await provider_obj.list_models()
    except ProviderError as exc:
        raise CommandError(exc.message) from exc
    finally:
        await provider_obj.aclose()
    wanted = args.strip().lower()
    names = sorted(n for n in names if wanted in n.lower())
    if not names:
        return ok(f"No model of {choice.name} matches '{wanted}'.", data=[])
    return ok(
        "\n".join(f"- {'**' + n + '**' if n == choice.model else n}" for n in names), data=names
    )
