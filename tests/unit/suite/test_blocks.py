"""Each suite block's static type (``checks.TopBlock`` …) says what ``check_keys`` keeps of it: the
keys of its runtime schema, each of the schema's types (a float field takes an int too)."""

import types
import typing

import pytest

from specbench.suite.checks import (
    CONFIG_KEYS,
    LOAD_KEYS,
    SERVER_KEYS,
    TOP_KEYS,
    ConfigBlock,
    LoadBlock,
    ServerBlock,
    TopBlock,
)


def _classes(hint) -> set[type]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set().union(*(_classes(a) for a in typing.get_args(hint)))
    cls = typing.get_origin(hint) or hint
    return {int, float} if cls is float else {cls}


@pytest.mark.parametrize(("block", "schema"), [(TopBlock, TOP_KEYS), (ConfigBlock, CONFIG_KEYS), (LoadBlock, LOAD_KEYS),
                                               (ServerBlock, SERVER_KEYS)])
def test_block_types_match_the_schema(block, schema):
    hints = typing.get_type_hints(block)
    assert set(hints) == set(schema)
    for key, expected in schema.items():
        assert _classes(hints[key]) == set(expected if isinstance(expected, tuple) else (expected,)), key
