"""One module per Kafka API, each a `HandlerModule`: API_KEY, VERSIONS (min, max) and
`handle` (see context.py for what a handler is given and what it returns).
"""

from dataplane.handlers import (
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_topics,
    delete_groups,
    delete_topics,
    describe_groups,
    fetch,
    find_coordinator,
    heartbeat,
    init_producer_id,
    join_group,
    leave_group,
    list_groups,
    list_offsets,
    metadata,
    offset_commit,
    offset_delete,
    offset_fetch,
    offset_for_leader_epoch,
    produce,
    sync_group,
)
from dataplane.handlers.context import Handler, HandlerModule

_MODULES: tuple[HandlerModule, ...] = (
    produce,
    fetch,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
    init_producer_id,
    find_coordinator,
    api_versions,
    create_topics,
    delete_topics,
    # group coordinator (classic protocol and committed offsets)
    join_group,
    sync_group,
    heartbeat,
    leave_group,
    offset_commit,
    offset_fetch,
    describe_groups,
    list_groups,
    delete_groups,
    offset_delete,
    # KIP-848 consumer groups
    consumer_group_heartbeat,
    consumer_group_describe,
)

HANDLERS: dict[int, Handler] = {m.API_KEY: m.handle for m in _MODULES}
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {m.API_KEY: m.VERSIONS for m in _MODULES}
