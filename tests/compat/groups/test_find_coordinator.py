"""FindCoordinator: of a group, of a transactional id, batched (v4+), and keys it refuses."""

from __future__ import annotations

import pytest

from tests.compat.groups.support import FIND
from tests.compat.pair import Pair

GROUP, TRANSACTION, SHARE = 0, 1, 2  # FindCoordinator's key types


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_find_coordinator_of_a_group(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: a group",
        FIND,
        version,
        key="compat-find",
        key_type=GROUP,
    )


@pytest.mark.parametrize("version", [1, 3])
def test_find_coordinator_of_a_transactional_id(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: a transactional id",
        FIND,
        version,
        key="compat-find-txn",
        key_type=TRANSACTION,
    )


@pytest.mark.parametrize("version", [4, 5, 6])
def test_find_coordinator_batched(pair: Pair, version: int) -> None:
    pair.call(
        f"FindCoordinator v{version}: three groups at once",
        FIND,
        version,
        key_type=GROUP,
        coordinator_keys=("compat-find-a", "compat-find-b", "compat-find-c"),
    )


@pytest.mark.parametrize(
    ("what", "version", "key_type", "keys"),
    [
        ("an empty group id", 3, GROUP, ("",)),
        ("an empty group id among others", 4, GROUP, ("compat-find-a", "")),
        ("an empty transactional id", 3, TRANSACTION, ("",)),
        ("an unknown key type", 3, 5, ("compat-find",)),
        ("an unknown key type, batched", 4, 5, ("compat-find",)),
        ("a share key before v6", 5, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA:0",)),
        ("a share key without a partition", 6, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA",)),
        ("a share key with a bad topic id", 6, SHARE, ("compat-find:nope:0",)),
        ("a share key with a bad partition", 6, SHARE, ("compat-find:AAAAAAAAAAAAAAAAAAAAAA:x",)),
        ("no keys", 4, GROUP, ()),
    ],
)
def test_find_coordinator_invalid_keys(
    pair: Pair, what: str, version: int, key_type: int, keys: tuple[str, ...]
) -> None:
    pair.call(
        f"FindCoordinator v{version}: {what}",
        FIND,
        version,
        key=keys[0] if keys else "",
        key_type=key_type,
        coordinator_keys=keys,
    )
