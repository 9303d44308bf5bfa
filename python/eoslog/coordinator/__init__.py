"""The coordinators (docs/coordinator.md): producer ids; the transaction coordinator and its
building blocks (transaction_log: `__transaction_state` records; transaction_state and
transaction_metadata: the state machine; transaction_decisions: request outcomes); the group
coordinator and its building blocks (offsets_log: `__consumer_offsets` records; offset_store:
committed and pending offsets; group_membership and assignors: members, rebalances and
assignment); message_fields and log_replay, shared by both."""
