"""The recipe library and its save-time validation, over a real service with the demo
tools: revisions, archive and restore, refusals by code, files on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doraforge.registry.errors import Conflict, NotFound, RegistryError, Unprocessable
from doraforge.registry.recipes.library import RecipeLibrary
from doraforge.registry.recipes.validate import fingerprint
from doraforge.registry.service import RegistryService
from tests.registry.recipes.support import big_count, demo_service, echo_twice, open_library

OPEN = {"type": "object", "additionalProperties": False, "properties": {}}


@pytest.fixture
def service() -> RegistryService:
    return demo_service()


@pytest.fixture
def library(service: RegistryService, tmp_path: Path) -> RecipeLibrary:
    return open_library(service, tmp_path / "recipes")


def _refusal(library: RecipeLibrary, definition: Any) -> RegistryError:
    with pytest.raises(RegistryError) as raised:
        library.save(definition)
    return raised.value


def _one_step(tool: str, arguments: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {
        "name": "recipe.probe",
        "description": "One step.",
        "input_schema": changes.pop("input_schema", OPEN),
        "steps": [{"tool": tool, "arguments": arguments}],
        **changes,
    }


def test_a_saved_recipe_is_a_catalog_tool_at_revision_one_with_its_origin(
    library: RecipeLibrary, service: RegistryService, tmp_path: Path
) -> None:
    summary, added = library.save(echo_twice())
    assert added is True
    assert summary["status"] == "active"
    assert summary["activeRevision"] == 1
    assert summary["tools"] == ["demo.echo", "demo.echo"]
    entry = service.resolve("recipe.echo-twice")
    assert entry is not None
    assert entry.origin is not None
    assert entry.providerName == "recipe_echo-twice"
    assert entry.origin.revision == 1
    assert entry.policy.requiredCapabilities == ["callToolRecipes"]
    assert entry.policy.sideEffect == "read"
    assert entry.policy.risk == "low"
    assert set(entry.policy.scopes) == {"agent", "ui"}
    stored = json.loads((tmp_path / "recipes" / "echo-twice.json").read_text())
    assert stored["active"] == 1
    assert len(stored["revisions"]) == 1


def test_saving_the_same_definition_adds_no_revision_and_a_change_adds_one(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.save(echo_twice())
    again, added = library.save(echo_twice())
    assert added is False
    assert again["activeRevision"] == 1
    revised, added = library.save(echo_twice(description="Echo twice, revised."))
    assert added is True
    assert revised["activeRevision"] == 2
    history = library.detail("recipe.echo-twice")["history"]
    assert [r["revision"] for r in history] == [2, 1]
    assert history[1]["definition"]["description"] == echo_twice()["description"]
    entry = service.resolve("recipe.echo-twice")
    assert entry is not None
    assert entry.origin is not None
    assert entry.origin.revision == 2


def test_the_step_tools_fingerprints_are_recorded_with_the_revision(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.save(echo_twice())
    echo = service.resolve("demo.echo")
    assert echo is not None
    revision = library.detail("recipe.echo-twice")["history"][0]
    assert revision["fingerprints"] == {"demo.echo": fingerprint(echo)}


def test_more_than_five_steps_are_refused_as_too_many(library: RecipeLibrary) -> None:
    definition = echo_twice()
    step = {"tool": "demo.echo", "arguments": {"text": "x"}}
    definition["steps"] = [step] * 6
    definition["output"] = []
    refusal = _refusal(library, definition)
    assert isinstance(refusal, Unprocessable)
    assert refusal.code == "RECIPE_TOO_MANY_STEPS"
    assert refusal.details == {"max": 5, "steps": 6}


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("demo.write", {"value": 1}, "RECIPE_WRITE_TOOL"),
        ("demo.panel", {}, "RECIPE_TOOL_OUT_OF_SCOPE"),
        ("demo.nothing", {}, "RECIPE_TOOL_UNKNOWN"),
    ],
)
def test_a_step_tool_an_agent_recipe_may_not_call_is_refused_at_save(
    library: RecipeLibrary, service: RegistryService, tool: str, arguments: Any, code: str
) -> None:
    refusal = _refusal(library, _one_step(tool, arguments))
    assert isinstance(refusal, Unprocessable)
    assert refusal.code == code
    assert refusal.details["step"] == 1
    assert service.resolve("recipe.probe") is None
    assert library.records == {}


def test_a_recipe_calling_a_recipe_is_refused(library: RecipeLibrary) -> None:
    library.save(big_count())
    refusal = _refusal(library, _one_step("recipe.big-count", {}))
    assert refusal.code == "RECIPE_NESTED"


TEXT_INPUT = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"text": {"type": "string"}, "n": {"type": "integer"}},
}


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"text": 5}, "text"),  # a literal of the wrong type
        ({"text": "x", "extra": 1}, "(arguments)"),  # an argument the tool does not take
        ({}, "(arguments)"),  # a required argument missing
        ({"text": {"$input": "n"}}, "text"),  # an integer input bound to a string
        ({"text": "x" * 101}, "text"),  # over the tool's maxLength
    ],
)
def test_arguments_that_do_not_fit_the_tool_schema_are_refused_with_their_path(
    library: RecipeLibrary, arguments: dict[str, Any], where: str
) -> None:
    refusal = _refusal(library, _one_step("demo.echo", arguments, input_schema=TEXT_INPUT))
    assert refusal.code == "RECIPE_INVALID"
    assert refusal.details["tool"] == "demo.echo"
    assert where in [error["path"] for error in refusal.details["errors"]]


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": {"$input": "missing"}},  # not a property of the recipe's input schema
        {"text": {"$step": 1, "pointer": "/text"}},  # not an earlier step
        {"text": {"$input": "text", "also": 1}},  # a '$' object that is no binding
        {"text": {"$step": 0, "pointer": "/text"}},  # steps count from 1
        {"text": {"$step": 1, "pointer": "text"}},  # a pointer starts with '/'
        {"text": {"$literal": "x"}},  # no other '$' key
    ],
)
def test_malformed_bindings_are_refused_as_invalid(
    library: RecipeLibrary, arguments: dict[str, Any]
) -> None:
    refusal = _refusal(library, _one_step("demo.echo", arguments, input_schema=TEXT_INPUT))
    assert refusal.code == "RECIPE_INVALID"


@pytest.mark.parametrize(
    "changes",
    [
        {"input_schema": {"type": "object"}},  # open
        {"input_schema": {"type": "object", "additionalProperties": False, "properties": 3}},
        {
            "input_schema": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"text": {"$ref": "https://schemas.example/text.json"}},
            }
        },
        {"input_schema": {"type": "object", "additionalProperties": False, "$id": "urn:x"}},
        {"name": "recipe.Has.Dots"},
        {"name": "tool.not-a-recipe"},
        {"description": ""},
        {"output": [3]},
        {"output": [1, 1]},
        {"unknown": True},
        {"steps": []},
    ],
)
def test_a_malformed_definition_is_refused_as_invalid(
    library: RecipeLibrary, changes: dict[str, Any]
) -> None:
    assert _refusal(library, echo_twice(**changes)).code == "RECIPE_INVALID"


def test_a_binding_whose_value_cannot_be_drawn_still_has_its_surroundings_checked(
    library: RecipeLibrary,
) -> None:
    # A step result fits wherever it goes (checked when it runs); the literal beside it not.
    definition = echo_twice()
    definition["steps"][1]["arguments"]["other"] = 1
    refusal = _refusal(library, definition)
    assert refusal.code == "RECIPE_INVALID"
    assert refusal.details["step"] == 2
    summary, _ = library.save(echo_twice())
    assert summary["activeRevision"] == 1


def test_a_name_held_by_another_tool_is_a_conflict(
    service: RegistryService, tmp_path: Path
) -> None:
    taken = {**_one_step("demo.echo", {"text": "x"})}
    service.register(
        {
            "name": "recipe.probe",
            "providerName": "not_a_recipe",
            "description": "A built-in that happens to use the name.",
            "input_schema": OPEN,
            "output_schema": {"type": "object"},
            "policy": {"scopes": ["agent"], "sideEffect": "read", "idempotent": True},
        },
        _answer,
    )
    library = open_library(service, tmp_path)
    refusal = _refusal(library, taken)
    assert isinstance(refusal, Conflict)
    assert refusal.code == "RECIPE_NAME_TAKEN"


async def _answer(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {}


def test_archive_removes_the_tool_and_restore_brings_back_the_active_revision(
    library: RecipeLibrary, service: RegistryService
) -> None:
    library.save(echo_twice())
    library.save(echo_twice(description="Second revision."))
    archived = library.archive("recipe.echo-twice")
    assert archived["status"] == "archived"
    assert archived["availability"] is None
    assert service.resolve("recipe.echo-twice") is None
    restored = library.restore("recipe.echo-twice")
    assert restored["status"] == "active"
    assert restored["activeRevision"] == 2
    older = library.restore("recipe.echo-twice", 1)
    assert older["activeRevision"] == 1
    entry = service.resolve("recipe.echo-twice")
    assert entry is not None
    assert entry.description == echo_twice()["description"]
    assert [r["revision"] for r in library.detail("recipe.echo-twice")["history"]] == [2, 1]


def test_restoring_a_revision_not_in_the_history_or_an_unknown_recipe_is_refused(
    library: RecipeLibrary,
) -> None:
    library.save(echo_twice())
    with pytest.raises(Conflict) as raised:
        library.restore("recipe.echo-twice", 7)
    assert raised.value.code == "RECIPE_REVISION_NOT_FOUND"
    assert raised.value.details == {"revisions": [1]}
    for name in ("recipe.nothing", "../etc/passwd", "x" * 500):
        with pytest.raises(NotFound) as missing:
            library.archive(name)
        assert missing.value.code == "RECIPE_NOT_FOUND"


def test_a_new_library_over_the_same_files_offers_the_same_recipes(tmp_path: Path) -> None:
    first = open_library(demo_service(), tmp_path)
    first.save(echo_twice())
    first.save(echo_twice(description="Second."))
    first.save(big_count())
    first.archive("recipe.big-count")
    service = demo_service()
    second = open_library(service, tmp_path)
    entry = service.resolve("recipe.echo-twice")
    assert entry is not None
    assert entry.origin is not None
    assert entry.origin.revision == 2
    assert service.resolve("recipe.big-count") is None
    assert second.get("recipe.big-count").archived is True


def test_malformed_files_are_skipped_and_reported_and_the_rest_load(tmp_path: Path) -> None:
    open_library(demo_service(), tmp_path).save(echo_twice())
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "twice.json").write_text('{"name": "recipe.twice", "name": "recipe.twice"}')
    good = json.loads((tmp_path / "echo-twice.json").read_text())
    (tmp_path / "impostor.json").write_text(json.dumps(good))  # holds another recipe's name
    broken = {**good, "name": "recipe.broken", "active": 9}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    service = demo_service()
    library = open_library(service, tmp_path)
    skipped = {row["file"]: row["code"] for row in library.skipped_files()}
    assert skipped == {
        "garbage.json": "RECIPE_FILE_INVALID",
        "twice.json": "RECIPE_FILE_INVALID",
        "impostor.json": "RECIPE_FILE_INVALID",
        "broken.json": "RECIPE_FILE_INVALID",
    }
    assert list(library.records) == ["recipe.echo-twice"]
    assert service.resolve("recipe.echo-twice") is not None


def test_the_catalog_shows_provenance_and_availability_never_literals_or_bindings(
    library: RecipeLibrary, service: RegistryService
) -> None:
    definition = echo_twice()
    definition["steps"][0]["arguments"]["text"] = "secret-literal-42"
    library.save(definition)
    library.save({**definition, "description": "Revised."})
    entry = service.resolve("recipe.echo-twice")
    assert entry is not None
    portos = service.project(entry, "portos")
    assert portos["origin"] == {
        "kind": "local-recipe",
        "revision": 2,
        "tools": ["demo.echo", "demo.echo"],
    }
    assert portos["availability"] == {"available": True, "code": None, "reason": None}
    for fmt in ("portos", "openai", "anthropic", "mcp"):
        text = json.dumps(service.project(entry, fmt))
        assert "secret-literal-42" not in text
        assert "$step" not in text
        assert "$input" not in text
        assert "pointer" not in text
    assert service.project(entry, "openai")["function"]["description"] == (
        "Revised. [local recipe, rev 2]"
    )
    assert service.project(entry, "anthropic")["description"].endswith(" [local recipe, rev 2]")
    assert service.project(entry, "mcp")["description"].endswith(" [local recipe, rev 2]")
    assert "[local recipe" not in portos["description"]


def test_a_built_in_tool_has_no_origin_or_availability_in_the_native_catalog(
    service: RegistryService,
) -> None:
    echo = service.resolve("demo.echo")
    assert echo is not None
    portos = service.project(echo, "portos")
    assert "origin" not in portos
    assert "availability" not in portos
    assert service.project(echo, "openai")["function"]["description"] == echo.description


def test_a_stored_recipe_whose_name_a_tool_took_since_is_skipped_not_fatal(
    tmp_path: Path,
) -> None:
    first = open_library(demo_service(), tmp_path)
    first.save(echo_twice())
    first.save(big_count())
    service = demo_service()
    service.register(
        {
            "name": "recipe.big-count",
            "providerName": "built_in_big",
            "description": "A built-in registered before the library opens.",
            "input_schema": OPEN,
            "output_schema": {"type": "object"},
            "policy": {"scopes": ["agent"], "sideEffect": "read", "idempotent": True},
        },
        _answer,
    )
    library = open_library(service, tmp_path)
    assert library.skipped_files() == [
        {
            "file": "big-count.json",
            "code": "TOOL_REGISTRATION_CONFLICT",
            "message": library.skipped[0].message,
        }
    ]
    assert list(library.records) == ["recipe.echo-twice"]
    entry = service.resolve("recipe.big-count")
    assert entry is not None
    assert entry.origin is None
