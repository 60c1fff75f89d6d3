"""ReAct (Yao et al. 2023): interleaved Thought / Action / Observation over the retriever.

Actions are *parsed*, never executed as code: ``Search[query]`` shows the best passage not
shown before (title and its first sentences, like the paper's Wikipedia API), ``Lookup[keyword]``
shows the next sentence containing the keyword in the last passage found, ``Finish[answer]``
ends. An unparseable action gets an "Invalid action" observation (recorded in the trace). At the
step limit (7, the paper's HotpotQA setting) the model is asked once for ``Finish[``.
Demonstrations come from the train files' gold decompositions: each step becomes a Search of
the sub-question and an observation from its supporting paragraph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hopqa.methods.base import FewShotMethod, MethodConfig, Result, register
from hopqa.methods.parsing import clean_answer
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

#: An action's name and its opening bracket; the argument runs to the next "]" (``parse_action``).
_ACTION = re.compile(r"(search|lookup|finish)\s*\[", re.IGNORECASE)
_THOUGHT_LABEL = re.compile(r"thought\s*(?:\d+\s*)?:\s*", re.IGNORECASE)
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


@dataclass
class ReActConfig(MethodConfig):
    k: int = 5
    max_steps: int = 7
    shots: int = 3
    observation_sentences: int = 5
    max_tokens: int = 128


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
        demos = "\n\n".join(format_demo(d) for d in self.demos)
        transcript = ""
        state = _State()
        for n in range(1, cfg.max_steps + 1):
            with step("react_step", step=n) as s:
                prompt = REACT_PROMPT.format(demos=demos, question=question, transcript=transcript)
                out = self.llm.generate(prompt + f"Thought {n}:", max_tokens=cfg.max_tokens,
                                        stop=[f"\nObservation {n}", "\nObservation", "\nQuestion:"]).text
                turn = out.strip()
                action = parse_action(turn)
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
                thought = turn.split("\nAction")[0].strip()
                if label := _THOUGHT_LABEL.match(thought):
                    thought = thought[label.end():]
                act_text = f"{action[0].capitalize()}[{action[1]}]" if action else "(none)"
                transcript += f"Thought {n}: {thought}\nAction {n}: {act_text}\nObservation {n}: {obs}\n"
        with step("forced_finish") as s:
            s.note(f"no Finish within {cfg.max_steps} steps: asking for Finish[")
            prompt = REACT_PROMPT.format(demos=demos, question=question, transcript=transcript)
            n = cfg.max_steps + 1
            out = self.llm.generate(prompt + f"Thought {n}: I must give my final answer now.\nAction {n}: Finish[",
                                    max_tokens=32, stop=["]", "\n"]).text
            answer = clean_answer(out)
            s.output(raw=out, answer=answer)
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
