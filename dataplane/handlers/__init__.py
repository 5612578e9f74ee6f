"""One module per Kafka API, each a `HandlerModule`: API_KEY, VERSIONS (min, max) and
`handle` (see context.py for what a handler is given and what it returns).
"""

from dataplane.handlers import (
    alter_user_scram_credentials,
    api_versions,
    consumer_group_describe,
    consumer_group_heartbeat,
    create_acls,
    create_delegation_token,
    create_topics,
    delete_acls,
    delete_groups,
    delete_topics,
    describe_acls,
    describe_delegation_token,
    describe_groups,
    describe_user_scram_credentials,
    expire_delegation_token,
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
    renew_delegation_token,
    sasl_authenticate,
    sasl_handshake,
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
    # ACLs (kept in the meta service)
    describe_acls,
    create_acls,
    delete_acls,
    # SASL authentication, SCRAM users, delegation tokens
    sasl_handshake,
    sasl_authenticate,
    describe_user_scram_credentials,
    alter_user_scram_credentials,
    create_delegation_token,
    renew_delegation_token,
    expire_delegation_token,
    describe_delegation_token,
)

HANDLERS: dict[int, Handler] = {m.API_KEY: m.handle for m in _MODULES}
SUPPORTED_VERSIONS: dict[int, tuple[int, int]] = {m.API_KEY: m.VERSIONS for m in _MODULES}
