"""The coordinators (COORDINATOR.md): producer ids, and the transaction coordinator's building
blocks (transaction_log: `__transaction_state` records; transaction_state and
transaction_metadata: the state machine; transaction_decisions: request outcomes). Groups next."""
