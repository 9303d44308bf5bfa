"""Tests of eoslog.client: the Producer (idempotent, transactional, the native fast path), the
Consumer, the read_committed fetch plan, and the confluent-kafka-shaped KafkaError."""
