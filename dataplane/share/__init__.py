"""Share groups (KIP-932): the share-partitions a broker leads (`partition_state.py`,
`manager.py`), share sessions, ShareFetch/ShareAcknowledge, and the durable share-partition
state in `__share_group_state` (`persister.py`, `state_coordinator.py`). The group membership
of share groups lives with the group coordinator (dataplane/coordinator/share/).
`model.py` holds the types those parts exchange."""
