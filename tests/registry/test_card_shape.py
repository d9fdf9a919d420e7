"""The fast card check (:mod:`node.registry.card_shape`) answers exactly as ``ParseDict`` does.

Every card below, and every mutation of it (each field set to each kind of JSON value, spelt
both ways, two oneof members, an extension-like key), is validated both ways: straight from the
dict where :func:`card_shape.fits` vouches for it, and always through ``ParseDict``. Both must
accept with the same view (name, description, interfaces, skills, extensions, agent id) or both
refuse.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from node.protocol import SKILL_SCHEMAS
from node.registry import card_shape, safejson
from node.registry.cards import InvalidCard, _agent_id, _card_view, parse_card

_OAUTH = {
    "oauth2SecurityScheme": {
        "flows": {"authorizationCode": {"authorizationUrl": "https://a", "scopes": {"r": "read"}}}
    }
}
CARDS: list[dict[str, Any]] = [
    {
        "name": "Unit Converter 00001",
        "description": "Converts units",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://127.0.0.1:1/a", "protocolBinding": "JSONRPC"}],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {"id": "convert-units", "name": "Convert", "description": "d", "tags": ["math", "x"]},
            {"id": "round", "name": "Round", "description": "", "tags": []},
        ],
    },
    {
        "name": "Declared",
        "supportedInterfaces": [{"url": "http://h/a"}, {"url": ""}],
        "capabilities": {
            "streaming": True,
            "extensions": [
                {"uri": "urn:other", "params": {"agent_id": 5}},
                {"uri": SKILL_SCHEMAS, "params": {"agent_id": "declared-id", "n": [1, None]}},
            ],
        },
        "provider": {"url": "https://p", "organization": "o"},
        "securitySchemes": {"oauth": _OAUTH, "key": {"apiKeySecurityScheme": {"name": "k"}}},
        "securityRequirements": [{"schemes": {"oauth": {"list": ["r"]}}}],
        "signatures": [{"protected": "p", "signature": "s", "header": {"kid": "1"}}],
        "iconUrl": "https://i",
        "documentation_url": "https://d",
        "skills": [{"id": "s", "tags": ["t"], "examples": ["e"], "securityRequirements": []}],
        "unknownField": {"anything": [1, 2.5, None]},
    },
]
_VALUES: list[Any] = [None, 1, 2.5, True, "x", "", [], {}, ["x"], [None], [{}], [1], {"a": 1}]


def _view(document: dict[str, Any], *, fast: bool) -> tuple[Any, ...] | str:
    try:
        view = _card_view(document, fast=fast)
        agent_id = _agent_id(view)
    except InvalidCard:
        return "refused"
    extensions = tuple(
        (uri, MessageToDict(p) if isinstance(p, Struct) else dict(p)) for uri, p in view.extensions
    )
    return (view.name, view.description, view.has_interface_url, view.skills, extensions, agent_id)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and list index in ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        yield (*path, key)
        if isinstance(item, dict | list):
            yield from _paths(item, (*path, key))


def _set(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(document)
    target: Any = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _mutants() -> Iterator[dict[str, Any]]:
    for card in CARDS:
        yield card
        for path in _paths(card):
            for value in _VALUES:
                yield _set(card, path, value)
        spelt_twice = copy.deepcopy(card)
        spelt_twice["supported_interfaces"] = [{"url": "http://other/"}]
        yield spelt_twice
        yield {**card, "default_input_modes": ["a"], "defaultInputModes": ["b"]}
        yield {**card, "[ext.name]": 1}
        yield {**card, "securitySchemes": {"k": {**_OAUTH, "mtlsSecurityScheme": {}}}}
        yield {**card, "securitySchemes": {"k": {"apiKeySecurityScheme": None}}}
        for key in card:
            yield {k: v for k, v in card.items() if k != key}


def test_fast_check_agrees_with_parse_dict_on_every_mutant() -> None:
    fast_used = 0
    count = 0
    for document in _mutants():
        document = safejson.loads(json.dumps(document))  # as a fetched card arrives
        count += 1
        fast_used += card_shape.fits(document)
        assert _view(document, fast=True) == _view(document, fast=False), document
    assert count > 1000
    assert fast_used > count // 5  # the fast path is taken, not always declined


def test_ordinary_cards_take_the_fast_path() -> None:
    for card in CARDS:
        assert card_shape.fits(card)
    assert parse_card(CARDS[1]).agent_id == "declared-id"


@pytest.mark.parametrize(
    "document",
    [
        {**CARDS[0], "name": 5},
        {**CARDS[0], "skills": [{"id": "a", "tags": "not-a-list"}]},
        {**CARDS[0], "capabilities": {"streaming": "yes"}},
        {**CARDS[0], "securitySchemes": {"k": {**_OAUTH, "mtlsSecurityScheme": {}}}},
    ],
)
def test_what_parse_dict_refuses_stays_refused(document: dict[str, Any]) -> None:
    assert not card_shape.fits(document)
    with pytest.raises(InvalidCard, match="not an A2A AgentCard"):
        parse_card(document)
