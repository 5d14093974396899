"""The frozen binding reads the Gateway's identity whatever form ``GET /tools`` lists it in,
so a Gateway restart (a new ``instance_id``) is still detected."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.paos.binding import BindingError, identity_document

DOCUMENT = {
    "gateway_id": "g",
    "instance_id": "gwinst-1",
    "started_at_ms": 1,
    "catalog_revision": "r",
}


@pytest.mark.parametrize(
    "listing",
    [
        # doraforge now: the string PhyAgentOS reads, the document beside it
        {"gateway_identity": "gwinst-1", "gateway_id": "g", "gateway": DOCUMENT},
        # an earlier doraforge: the document itself as gateway_identity
        {"gateway_identity": DOCUMENT},
    ],
)
def test_the_identity_document_is_read_from_either_doraforge_listing(
    listing: dict[str, Any],
) -> None:
    assert identity_document(listing) == DOCUMENT


def test_a_string_only_identity_becomes_its_instance_id() -> None:
    assert identity_document({"gateway_identity": "gw-abc"}) == {"instance_id": "gw-abc"}


def test_a_listing_without_an_identity_is_refused() -> None:
    with pytest.raises(BindingError) as raised:
        identity_document({"tools": []})
    assert raised.value.code == "PAOS_BINDING_INVALID"
