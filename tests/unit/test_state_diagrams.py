"""The state diagrams in the store's docstrings and the SQL statements they name are one and the same.

Each arrow of a diagram names the statement that makes it; every statement of
the diagram's SQL files is an arrow's or is listed beside them, and no other
file of the folder moves an event. A transition added to one and not the
other fails here, and so does a state the enum and the diagram do not share.
No database: the files are read as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from types import ModuleType

import pytest

from inboxd.domain.action_states import ActionWrite, plan_action_write
from inboxd.domain.errors import TransitionNotAllowed
from inboxd.domain.vocabulary import ActionState, EventState
from inboxd.store import actions as store_actions
from inboxd.store import events as store_events
from inboxd.store.queries import named_sections

_ARROW = re.compile(r"^    (\(none\)|[A-Z_]+) +-> +(\(deleted\)|[A-Z_]+) +(\w+) {2,}\S", re.MULTILINE)
_BESIDE = re.compile(r"^    (\w+) {2,}\S", re.MULTILINE)
_SCHEMA_FUNCTION = re.compile(r"\b(inboxd_\w+)\(")


@dataclass(frozen=True)
class Diagram:
    arrows: frozenset[tuple[str, str, str]]  # (from, to, statement)
    beside: frozenset[str]

    @property
    def states(self) -> set[str]:
        return {s for a, b, _ in self.arrows for s in (a, b)} - {"(none)", "(deleted)"}

    @property
    def statements(self) -> set[str]:
        return {statement for _, _, statement in self.arrows}


def diagram(module: ModuleType) -> Diagram:
    doc = module.__doc__ or ""
    arrows, rest = doc.split("Beside the transitions", 1)
    return Diagram(
        frozenset(_ARROW.findall(arrows)),
        frozenset(name for name in _BESIDE.findall(rest)),
    )


# The event's transitions stand in rooms named for what they do (Accept's,
# Claim's, Complete's, a Work stream's, the operators', the rest), one diagram over the six.
EVENT_FILES = ("accepts.sql", "claims.sql", "completions.sql", "events.sql", "streams.sql", "operator_actions.sql")
ACTION_FILES = ("actions.sql",)


def statements(*sql_files: str) -> dict[str, str]:
    """The named statements of these queries files, as written (comments included)."""
    found: dict[str, str] = {}
    for sql_file in sql_files:
        text = resources.files("inboxd.store").joinpath("queries", sql_file).read_text(encoding="utf-8")
        for name, body in named_sections(text, sql_file).items():
            assert name not in found, f"{name} stands in two files"
            found[name] = body
    return found


def query_files() -> list[str]:
    """Every queries file of the folder."""
    folder = resources.files("inboxd.store").joinpath("queries")
    return sorted(entry.name for entry in folder.iterdir() if entry.name.endswith(".sql"))


def _written_text(statement: str) -> str:
    """The statement without comments, and the body of any inboxd_ function it calls (from schema.sql)."""
    text = "\n".join(line.split("--", 1)[0] for line in statement.splitlines())
    schema = resources.files("inboxd.store").joinpath("schema.sql").read_text(encoding="utf-8")
    read: set[str] = set()
    while called := set(_SCHEMA_FUNCTION.findall(text)) - read:
        for function in sorted(called):
            found = re.search(rf"FUNCTION (?:public\.)?{function}\(", schema)
            assert found is not None, f"schema.sql defines no {function}"
            text += schema[found.start() : schema.index("$$;", found.start())]
        read |= called
    return text


CASES = [
    pytest.param(store_events, EVENT_FILES, {s.name for s in EventState}, id="event"),
    pytest.param(store_actions, ACTION_FILES, {s.name for s in ActionState}, id="action"),
]


@pytest.mark.parametrize(("module", "sql_files", "states"), CASES)
def test_every_state_has_its_place_in_the_diagram_and_no_other(
    module: ModuleType, sql_files: tuple[str, ...], states: set[str]
) -> None:
    assert diagram(module).states == states


@pytest.mark.parametrize(("module", "sql_files", "states"), CASES)
def test_every_statement_of_the_files_is_named_by_the_diagram_and_none_more(
    module: ModuleType, sql_files: tuple[str, ...], states: set[str]
) -> None:
    drawn = diagram(module)
    assert drawn.arrows, "the diagram has no arrows: its lines no longer parse"
    assert not drawn.statements & drawn.beside, "a statement is both a transition and beside them"
    assert set(statements(*sql_files)) == drawn.statements | drawn.beside


_STATE_TEST = re.compile(r"\bstate\s+(?:=|IS NOT DISTINCT FROM|IN)\s+(\([^)]*\)|'\w+')")
_STATE_SET = re.compile(r"\bSET state = (CASE\b.*?\bEND|'\w+')", re.DOTALL)
_LITERAL = re.compile(r"'(\w+)'")
# A cut-off on due_at lets through exactly the open states: due_at is set while
# PENDING or PROCESSING and only then (the CHECK inbox_events_due_while_open).
_DUE_TEST = re.compile(r"\bdue_at\s*<=")


def _states_tested(text: str) -> set[str]:
    """The states a statement's WHERE conditions let through: where its arrows start."""
    found: set[str] = set()
    for line in text.splitlines():
        if line.lstrip().startswith(("WHERE", "AND")):
            for test in _STATE_TEST.findall(line):
                found |= {state.upper() for state in _LITERAL.findall(test)}
            if _DUE_TEST.search(line):
                found |= {"PENDING", "PROCESSING"}
    return found or {"(none)"}


def _states_written(text: str) -> set[str]:
    """The states a statement sets, inserts, or (deleted): where its arrows end."""
    found = {state.upper() for written in _STATE_SET.findall(text) for state in _LITERAL.findall(written)}
    for inserted in re.findall(r"INSERT INTO inbox_events\b.*?ON CONFLICT", text, re.DOTALL):
        found |= {state.upper() for state in _LITERAL.findall(inserted)} & {s.name for s in EventState}
    if re.search(r"DELETE FROM inbox_events\b", text):
        found.add("(deleted)")
    return found


def _pairs_made(text: str) -> set[tuple[str, str]]:
    """The (from, to) pairs a statement makes: each state it lets through, to each state it writes.

    Every statement of the event's files moves any state it tests to any state it
    writes (a Claim of a PENDING or an expired PROCESSING event may lease it,
    dead-letter it or ignore it as stale, whichever it was), so its pairs are
    the product. A statement that sets no state leaves the event where it was
    (RenewLease).
    """
    tested = _states_tested(text)
    written = _states_written(text) or tested
    return {(before, after) for before in tested for after in written}


def _arrows_not_made(arrows: frozenset[tuple[str, str, str]]) -> dict[str, set[tuple[str, str]]]:
    """Per statement, the pairs drawn and not made, and made and not drawn (empty when they agree)."""
    written = statements(*EVENT_FILES)
    wrong: dict[str, set[tuple[str, str]]] = {}
    for name in sorted({statement for _, _, statement in arrows}):
        drawn = {(before, after) for before, after, statement in arrows if statement == name}
        if differ := drawn ^ _pairs_made(_written_text(written[name])):
            wrong[name] = differ
    return wrong


def test_every_event_arrow_is_a_pair_its_statement_makes_and_none_more() -> None:
    assert _arrows_not_made(diagram(store_events).arrows) == {}


def test_an_arrow_dropped_from_the_diagram_is_caught() -> None:
    """The pairs check can fail: one arrow of Claim's six gone, every state still drawn."""
    arrows = diagram(store_events).arrows - {("PROCESSING", "DEAD_LETTERED", "event_claim")}
    assert {state for a, b, _ in arrows for state in (a, b)} >= {"PROCESSING", "DEAD_LETTERED"}
    assert _arrows_not_made(arrows) == {"event_claim": {("PROCESSING", "DEAD_LETTERED")}}


def test_the_action_diagram_is_what_plan_action_write_lets_through() -> None:
    allowed: set[tuple[str, str, str]] = {("(none)", new.name, "action_create") for new in ActionState}
    for current in ActionState:
        for new in ActionState:
            for older in (False, True):
                try:
                    plan = plan_action_write(current, new, from_older_claim=older)
                except TransitionNotAllowed:
                    continue
                if plan is ActionWrite.UPDATE:
                    allowed.add((current.name, new.name, "action_update"))
    assert diagram(store_actions).arrows == allowed


def test_a_transition_drawn_without_its_statement_is_caught() -> None:
    """The check can fail: one arrow more, to a statement the file lacks."""

    class Drawn(ModuleType):
        pass

    extra = Drawn("extra")
    extra.__doc__ = (store_events.__doc__ or "").replace(
        "    COMPLETED     -> (deleted)",
        "    DEAD_LETTERED -> (deleted)      event_delete_dead_lettered  retention, were it to\n"
        "    COMPLETED     -> (deleted)",
    )
    drawn = diagram(extra)
    assert ("DEAD_LETTERED", "(deleted)", "event_delete_dead_lettered") in drawn.arrows
    assert set(statements(*EVENT_FILES)) != drawn.statements | drawn.beside


def _events_moved_outside(written: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """Per statement of a file (file: statements) not of the event's, the event states it writes."""
    return {
        f"{sql_file}:{name}": moved
        for sql_file, in_file in written.items()
        if sql_file not in EVENT_FILES
        for name, statement in in_file.items()
        if (moved := _states_written(_written_text(statement)))
    }


def test_no_file_but_the_events_moves_an_event() -> None:
    """A transition in a room the diagram's check does not read would go unchecked."""
    assert _events_moved_outside({sql_file: statements(sql_file) for sql_file in query_files()}) == {}


def test_a_transition_outside_the_event_files_is_caught() -> None:
    """The check can fail: Fail's statement as if it stood in wakeups.sql."""
    moved = {"wakeups.sql": {"event_fail": statements("events.sql")["event_fail"]}}
    assert _events_moved_outside(moved) == {"wakeups.sql:event_fail": {"PENDING", "DEAD_LETTERED"}}
