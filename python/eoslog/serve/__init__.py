"""The Kafka wire protocol in front of a broker: `eoslog serve` and `Broker.serve` (docs/design.md
"Wire protocol")."""
