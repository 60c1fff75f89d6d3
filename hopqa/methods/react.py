"""ReAct (Yao et al. 2023): interleaved Thought / Action / Observation over the retriever.

Actions are *parsed*, never executed as code: ``Search[query]`` shows the best passage not
shown before (title and its first sentences, like the paper's Wikipedia API), ``Lookup[keyword]``
shows the next sentence containing the keyword in the last passage found, ``Finish[answer]``
ends. An unparseable action gets an "Invalid action" observation (recorded in the trace). At the
step limit (7, the paper's HotpotQA setting) the model is asked once for ``Finish[``.
Demonstrations come from the train files' gold decompositions: each step becomes a Search of
the sub-question and an observation from its supporting paragraph.

Structured steps (``structured``, ``hopqa.methods.structured``): where the backend constrains to
a JSON schema, each step sends the same prompt (demonstrations and transcript in the paper's
text) with ``json_reply`` in place of the cue "Thought N:", and the model writes
``{"thought": str, "action": "Search" | "Lookup" | "Finish", "argument": str}`` (``STEP_SCHEMA``:
the thought first, then the action it leads to). The step goes into the transcript as the paper's
"Thought N: ...\nAction N: Search[...]", so later prompts look as in free text. The forced finish
asks for ``{"answer": str}`` (``FINISH_SCHEMA``) after "Thought N: I must give my final answer
now." instead of the cue "Action N: Finish[". A reply that is not JSON (a server that ignored the
schema) is read by the free-text parser (parse record ``fallback``); no usable action is the
"Invalid action" observation (``failed``). In free text an action after its "Action N:" label is
``direct``, one without the label ``fallback``; a forced finish that starts with a leaked
"Thought N:" (or "Action N: Finish[") has it stripped (``fallback``: small models such as
Qwen2.5-1.5B restart the pattern there), an empty one is an empty answer (``failed``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.parsing import clean_answer
from hopqa.methods.structured import (
    Parsed,
    StructuredMode,
    direct,
    failed,
    fallback,
    json_reply,
    loads_object,
    object_schema,
    read,
    use_schema,
)
from hopqa.trace import step
from hopqa.types import Demo, Passage

#: Instruction (ReAct, Appendix C HotpotQA prompt, adapted to a passage retriever).
REACT_PROMPT = (
    "Solve a question answering task with interleaving Thought, Action, Observation steps. Thought can "
    "reason about the current situation, and Action can be three types:\n"
    "(1) Search[query], which searches the passage collection and returns the best new passage.\n"
    "(2) Lookup[keyword], which returns the next sentence containing keyword in the last passage.\n"
    "(3) Finish[answer], which returns the answer and finishes the task.\n"
    "Here are some examples.\n\n{demos}\n\nQuestion: {question}\n{transcript}"
)

#: Structured step (``structured``): the schema, and the closing instruction that replaces the
#: cue "Thought N:" after the transcript.
ACTIONS = ("Search", "Lookup", "Finish")
STEP_SCHEMA = object_schema({
    "thought": {"type": "string"},
    "action": {"type": "string", "enum": list(ACTIONS)},
    "argument": {"type": "string"},
})
STEP_INSTRUCTION = json_reply({
    "thought": "reason about the current situation",
    "action": " | ".join(ACTIONS),
    "argument": "the query, the keyword or the answer",
})
#: Structured forced finish: after "Thought N: I must give my final answer now." this
#: instruction replaces the cue "Action N: Finish[".
FINISH_SCHEMA = object_schema({"answer": {"type": "string"}})
FINISH_INSTRUCTION = json_reply({"answer": "the short answer"})
#: Room for the JSON wrapper of a structured call (its keys, quotes and braces), in tokens.
JSON_TOKENS = 32

#: An action's name and its opening bracket; the argument runs to the next "]" (``parse_action``).
_ACTION = re.compile(r"(search|lookup|finish)\s*\[", re.IGNORECASE)
_THOUGHT_LABEL = re.compile(r"thought\s*(?:\d+\s*)?:\s*", re.IGNORECASE)
#: The "Action N:" label right before an action (searched in the few characters before it).
_ACTION_LABEL = re.compile(r"action\s*(?:\d+\s*)?:\s*$", re.IGNORECASE)
#: A forced finish that restarts the pattern: "Thought N:" or "Action N: Finish[" leaked into it.
_LEAKED = re.compile(r"\s*(?:thought|action)\s*(?:\d+\s*)?:\s*(?:finish\s*\[)?", re.IGNORECASE)  # no overlapping \s* (linear)
_SENT = re.compile(r"(?<=[a-z0-9)\]\"'][.!?])\s+")


def sentences(text: str) -> list[str]:
    return [s for s in _SENT.split(" ".join(text.split())) if s]


def observe(p: Passage, n_sentences: int) -> str:
    return f"[{p.title}] " + " ".join(sentences(p.text)[:n_sentences])


def format_demo(demo: Demo) -> str:
    lines = [f"Question: {demo.question}"]
    n = 0
    for n, s in enumerate(demo.steps, 1):
        lines.append(f"Thought {n}: I need to find out: {s.question}")
        lines.append(f"Action {n}: Search[{s.question}]")
        obs = observe(s.passage, 3) if s.passage else s.answer
        lines.append(f"Observation {n}: {obs}")
    lines.append(f"Thought {n + 1}: So the answer is {demo.answer}.")
    lines.append(f"Action {n + 1}: Finish[{demo.answer}]")
    return "\n".join(lines)


def parse_action(text: str) -> tuple[str, str] | None:
    """(action, argument) of the first well-formed action in a model turn, or None.

    The argument is everything up to the first "]" after the bracket (newlines allowed). When
    the first action's bracket is never closed no later one can be, so one search and one
    ``str.find`` decide: linear in the length of ``text``."""
    m = _ACTION.search(text)
    if not m:
        return None
    close = text.find("]", m.end())
    if close < 0:
        return None
    return m.group(1).lower(), " ".join(text[m.end():close].split())


class Turn(NamedTuple):
    """A model turn read: its thought and its action (None: no parseable action)."""

    thought: str
    action: tuple[str, str] | None


def thought_of(turn: str) -> str:
    """The free-text thought: the turn up to its "Action", without a repeated "Thought N:"."""
    thought = turn.split("\nAction")[0].strip()
    if label := _THOUGHT_LABEL.match(thought):
        thought = thought[label.end():]
    return thought


def parse_turn(text: str) -> Parsed[Turn]:
    """The free-text turn (``parse_action``): ``direct`` for an action after its "Action N:"
    label, ``fallback`` for one without it, ``failed`` when there is none."""
    turn = text.strip()
    action, m = parse_action(turn), _ACTION.search(turn)
    if action is None or m is None:
        return failed("no parseable action")
    if _ACTION_LABEL.search(turn, max(0, m.start() - 24), m.start()):
        return direct(Turn(thought_of(turn), action), "Action N: X[...]")
    return fallback(Turn(thought_of(turn), action), "an action without its 'Action N:' label")


def turn_from_json(obj: dict[str, Any]) -> Turn | None:
    """A ``STEP_SCHEMA`` object as a turn (whitespace collapsed, a leaked "Thought N:" label
    dropped); None without a known action and a string argument."""
    action, argument, thought = obj.get("action"), obj.get("argument"), obj.get("thought")
    if not isinstance(action, str) or action.capitalize() not in ACTIONS or not isinstance(argument, str):
        return None
    thought = " ".join(thought.split()) if isinstance(thought, str) else ""
    if label := _THOUGHT_LABEL.match(thought):
        thought = thought[label.end():]
    return Turn(thought, (action.lower(), " ".join(argument.split())))


def parse_finish(text: str) -> Parsed[str]:
    """The free-text reply to the forced "Finish[": ``direct``; ``fallback`` after stripping a
    leaked "Thought N:" / "Action N: Finish["; ``failed`` (an empty answer) when nothing is left."""
    if m := _LEAKED.match(text):
        answer = clean_answer(text[m.end():])
        return fallback(answer, "a leaked 'Thought N:' stripped") if answer else failed("only a leaked 'Thought N:'")
    answer = clean_answer(text)
    return direct(answer, "Finish[") if answer else failed("an empty answer")


def finish_from_json(obj: dict[str, Any]) -> str | None:
    """A ``FINISH_SCHEMA`` object's answer; None when empty."""
    answer = obj.get("answer")
    return (clean_answer(answer) or None) if isinstance(answer, str) else None


def _unparsed_thought(text: str, structured: bool) -> str:
    """The thought of a turn without a usable action: a JSON object's ``thought`` when a
    schema-constrained reply holds one, else the free-text thought."""
    obj = loads_object(text)[0] if structured else None
    if obj is not None and isinstance(obj.get("thought"), str):
        return " ".join(obj["thought"].split())
    return thought_of(text.strip())



@dataclass
class ReActConfig(MethodConfig):
    k: int = 5
    max_steps: int = 7
    shots: int = 3
    observation_sentences: int = 5
    max_tokens: int = 128
    #: Structured outputs for the structured steps (``hopqa.methods.structured``): ``auto``
    #: where the backend can constrain to a JSON schema, ``on``, or ``off`` (the paper's free text).
    structured: StructuredMode = "auto"


@dataclass
class _State:
    shown: set[str] = field(default_factory=set)
    last: Passage | None = None
    lookup_hits: list[str] = field(default_factory=list)
    lookup_key: str = ""
    used: list[Passage] = field(default_factory=list)


@register("react")
class ReAct(FewShotMethod):
    """Thought / Action / Observation loop with Search, Lookup and Finish."""

    Config = ReActConfig
    config: ReActConfig

    def run(self, question: str) -> Result:
        cfg = self.config
        structured = use_schema(self.llm, cfg.structured, who="ReAct's actions")
        demos = "\n\n".join(format_demo(d) for d in self.demos)
        transcript = ""
        state = _State()
        for n in range(1, cfg.max_steps + 1):
            with step("react_step", step=n) as s:
                prompt = REACT_PROMPT.format(demos=demos, question=question, transcript=transcript)
                if structured:  # max_tokens: room for the JSON wrapper too
                    gen = self.llm.generate(prompt + STEP_INSTRUCTION, max_tokens=cfg.max_tokens + JSON_TOKENS,
                                            schema=STEP_SCHEMA)
                    turn = read(gen.text, True, turn_from_json, parse_turn, field="action",
                                schema_ignored=gen.schema_ignored)
                else:
                    gen = self.llm.generate(prompt + f"Thought {n}:", max_tokens=cfg.max_tokens,
                                            stop=[f"\nObservation {n}", "\nObservation", "\nQuestion:"])
                    turn = read(gen.text, False, turn_from_json, parse_turn, field="action")
                out = gen.text
                action = turn.value.action if turn.value else None
                s.output(raw=out, action=list(action) if action else None)
                if action and action[0] == "finish":
                    return Result(answer=clean_answer(action[1]), passages=state.used)
                n_used = len(state.used)
                obs = self.act(action, state) if action else (
                    "Invalid action. Valid actions are Search[<query>], Lookup[<keyword>] and Finish[<answer>].")
                if not action:
                    s.note("no parseable action in the model's turn")
                else:  # the hop's passage: the one a Search showed (Lookup reads the last one)
                    shown = state.used[n_used:] or ([state.last] if action[0] == "lookup" and state.last else [])
                    s.mark_hop(f"{action[0].capitalize()}[{action[1]}]", obs, label=action[0], passages=shown)
                s.output(observation=obs)
                thought = turn.value.thought if turn.value else _unparsed_thought(out, structured)
                act_text = f"{action[0].capitalize()}[{action[1]}]" if action else "(none)"
                transcript += f"Thought {n}: {thought}\nAction {n}: {act_text}\nObservation {n}: {obs}\n"
        with step("forced_finish") as s:
            s.note(f"no Finish within {cfg.max_steps} steps: asking for Finish[")
            prompt = REACT_PROMPT.format(demos=demos, question=question, transcript=transcript)
            n = cfg.max_steps + 1
            prompt += f"Thought {n}: I must give my final answer now.\n"
            if structured:
                gen = self.llm.generate(prompt + FINISH_INSTRUCTION, max_tokens=32 + JSON_TOKENS, schema=FINISH_SCHEMA)
                finish = read(gen.text, True, finish_from_json, parse_finish, field="answer",
                              schema_ignored=gen.schema_ignored)
            else:
                gen = self.llm.generate(prompt + f"Action {n}: Finish[", max_tokens=32, stop=["]", "\n"])
                finish = read(gen.text, False, finish_from_json, parse_finish, field="answer")
            answer = finish.value or ""
            s.output(raw=gen.text, answer=answer)
        return Result(answer=answer, passages=state.used)

    def act(self, action: tuple[str, str], state: _State) -> str:
        """Carry out Search or Lookup (as data operations on the retriever) and describe the result."""
        kind, arg = action
        if not arg:
            return f"{kind.capitalize()} needs an argument in brackets."
        if kind == "search":
            hits = [p for p in self.retriever.search(arg, self.config.k) if p.id not in state.shown]
            if not hits:
                return f"Could not find anything new for [{arg}]. Try a different search."
            p = hits[0]
            state.shown.add(p.id)
            state.last = p
            state.used.append(p)
            state.lookup_key, state.lookup_hits = "", []
            return observe(p, self.config.observation_sentences)
        if state.last is None:
            return "Lookup needs a passage: Search first."
        if arg.lower() != state.lookup_key:
            state.lookup_key = arg.lower()
            state.lookup_hits = [s for s in sentences(state.last.text) if arg.lower() in s.lower()]
        if not state.lookup_hits:
            return "No more results."
        return state.lookup_hits.pop(0)
