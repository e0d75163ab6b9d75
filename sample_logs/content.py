"""Synthetic prompt and completion text for the spans that capture content.

Every prompt text holds `PROMPT_MARKER` and every completion text `COMPLETION_MARKER`, so a test can
prove that no text reaches the store. Agent prompts are built from blocks that repeat: one system
prompt for every agent call, one context block per repository, and a trace's history that each call
extends, so prefix reuse can be measured from hashes of the leading blocks.
"""

from __future__ import annotations

import json

from phaselens.sample_logs.simcall import SimCall

PROMPT_MARKER = "PHASELENS-SECRET-PROMPT"
COMPLETION_MARKER = "PHASELENS-SECRET-COMPLETION"

AGENT_SYSTEM = (
    f"{PROMPT_MARKER} You are editor-agent, a coding agent working inside the user's repository. "
    "Plan briefly, then call one tool at a time: read_file(path), grep(pattern), run_tests(selector). "
    "Never invent file contents; quote paths exactly; stop when the tests pass."
)
CHAT_SYSTEM = (
    f"{PROMPT_MARKER} You are the editor's chat assistant. Answer about the open project concisely, "
    "with code blocks for code, and say when you are unsure."
)

Message = tuple[str, str]  # (role, text)


def repo_context(repo: str) -> str:
    """The repository context block every agent call on `repo` carries after the system prompt."""
    return (f"{PROMPT_MARKER} Repository {repo}: module map, coding conventions, build and test "
            f"commands, and the ten most recently changed files of {repo}.")


def agent_messages(trace: list[SimCall], step: int) -> list[Message]:
    """Prompt of agent call `step`: system, repo context, task, then the trace's history so far."""
    first = trace[0]
    messages: list[Message] = [
        ("system", AGENT_SYSTEM),
        ("user", repo_context(first.repo or "")),
        ("user", f"{PROMPT_MARKER} Task {first.trace_id}: make the failing check pass."),
    ]
    for call in trace[:step]:
        if call.status != "ok":
            continue  # a failed call is retried with the same prompt
        messages.append(("assistant", agent_completion(call)))
        if call.tool_after:
            messages.append(("tool", f"{PROMPT_MARKER} {call.tool_after} result after step {call.step}."))
    return messages


def agent_completion(call: SimCall) -> str:
    """Completion text of an agent call: a tool request, or the final answer on the last step."""
    action = f"call {call.tool_after}" if call.tool_after else "final answer"
    return f"{COMPLETION_MARKER} step {call.step}: {action}."


def chat_messages(call: SimCall) -> list[Message]:
    """Prompt of a chat turn: system prompt, the session's earlier turns, the new user message."""
    messages: list[Message] = [("system", CHAT_SYSTEM)]
    for turn in range(call.step):
        messages.append(("user", _chat_user(call.session_id, turn)))
        messages.append(("assistant", _chat_answer(call.session_id, turn)))
    messages.append(("user", _chat_user(call.session_id, call.step)))
    return messages


def chat_completion(call: SimCall) -> str:
    """Completion text of a chat turn."""
    return _chat_answer(call.session_id, call.step)


def _chat_user(session: str | None, turn: int) -> str:
    return f"{PROMPT_MARKER} question {turn} of {session}: how does this function handle retries?"


def _chat_answer(session: str | None, turn: int) -> str:
    return f"{COMPLETION_MARKER} answer {turn} of {session}: it retries three times with backoff."


def semconv_content(messages: list[Message], completion: str | None, finish: str) -> dict:
    """OTel GenAI opt-in content attributes (`gen_ai.input.messages`, `gen_ai.output.messages`)."""
    attrs = {"gen_ai.input.messages": json.dumps(
        [{"role": role, "parts": [{"type": "text", "content": text}]} for role, text in messages])}
    if completion is not None:
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": completion}], "finish_reason": finish}])
    return attrs


def openllmetry_content(messages: list[Message], completion: str | None, finish: str) -> dict:
    """OpenLLMetry indexed content attributes (`gen_ai.prompt.N.*`, `gen_ai.completion.0.*`)."""
    attrs: dict = {}
    for i, (role, text) in enumerate(messages):
        attrs[f"gen_ai.prompt.{i}.role"] = role
        attrs[f"gen_ai.prompt.{i}.content"] = text
    if completion is not None:
        attrs.update({"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": completion,
                      "gen_ai.completion.0.finish_reason": finish})
    return attrs


def openinference_content(messages: list[Message], completion: str | None, model: str) -> dict:
    """OpenInference content attributes (`llm.input_messages.N.message.*`, `input.value`, `output.value`)."""
    attrs: dict = {}
    for i, (role, text) in enumerate(messages):
        attrs[f"llm.input_messages.{i}.message.role"] = role
        attrs[f"llm.input_messages.{i}.message.content"] = text
    attrs["input.value"] = json.dumps({"model": model, "messages": [{"role": r, "content": t} for r, t in messages]})
    attrs["input.mime_type"] = "application/json"
    if completion is not None:
        attrs.update({"llm.output_messages.0.message.role": "assistant",
                      "llm.output_messages.0.message.content": completion,
                      "output.value": completion, "output.mime_type": "text/plain"})
    return attrs


# Attribute keys that may carry text, per marker; a test checks that markers appear nowhere else.
PROMPT_KEY_PATTERNS = ("gen_ai.input.messages", "gen_ai.prompt.", "llm.input_messages.", "input.value")
COMPLETION_KEY_PATTERNS = ("gen_ai.output.messages", "gen_ai.completion.", "llm.output_messages.", "output.value")
