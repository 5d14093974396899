"""``serve --grant callToolRecipes``: the recipe grant is a capability name serve accepts
(off unless given), while malformed grant names are still refused."""

from __future__ import annotations

import pytest

from doraforge.registry.recipes.library import GRANT
from doraforge.registry.settings import SettingsError, load_settings


def test_the_recipe_grant_is_accepted_and_off_by_default() -> None:
    assert GRANT == "callToolRecipes"
    assert GRANT not in load_settings().grants
    assert GRANT in load_settings(grants=[GRANT]).grants


@pytest.mark.parametrize("name", ["CallToolRecipes", "call tool", "9recipes", "", "x" * 65])
def test_malformed_grant_names_are_still_refused(name: str) -> None:
    with pytest.raises(SettingsError):
        load_settings(grants=[name])
