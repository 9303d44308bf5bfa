"""The client API (docs/api.md "Producer", "Consumer"): confluent-kafka-python's names, config keys,
Message accessors and error model, over the partition logs of one Broker in this process."""
