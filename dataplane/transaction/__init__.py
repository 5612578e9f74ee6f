"""Transactions (issue 12): Kafka's transaction coordinator and the partition leaders' side.

The coordinator, on the leaders of `__transaction_state`'s partitions:

* coordinator.py — `TransactionCoordinator`: the API the handlers call, wiring the flows below
* config.py — its settings (Kafka's TransactionConfig)
* state_manager.py — the shards, the write of a transition (persisted before it is applied),
  the task group of the background work (Kafka's TransactionStateManager)
* init_producer_id.py — InitProducerId: producer ids and epochs, fencing older incarnations
* add_partitions.py — AddPartitionsToTxn, AddOffsetsToTxn and the leaders' KIP-890 checks
* end_txn.py — EndTxn's state machine up to PrepareCommit/PrepareAbort, and the coordinator's
  own fenced aborts
* completion.py — then the markers and CompleteCommit/CompleteAbort; resumed by a new leader
* expiry.py — the aborts of timed-out transactions, the removal of expired ids
* listing.py — DescribeTransactions and ListTransactions
* refusals.py — the errors clients get and the log lines that explain them
* state.py — one transactional id's state and its legal transitions (TransactionMetadata)
* shard.py — the ids of one `__transaction_state` partition, rebuilt by replaying it
* records.py, record_schemas.py — that partition's records, byte for byte as Kafka's

Between brokers: markers.py (the coordinator's marker sender, the leaders' WriteTxnMarkers and
AddPartitionsToTxn RPCs) and verification.py (a leader asking the coordinator, KIP-890).
"""
