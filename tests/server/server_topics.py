"""Topic set-up shared by the server tests that drive real clients."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

# For kafka-python group members. kafka-python can lose a metadata update asked for while
# another refresh is in flight (ClusterMetadata.update_metadata sets its need-update flag from
# the answer alone). Subscribing while the bootstrap's refresh (asked without the topic) is
# out then leaves the member without the topic's partitions until the next periodic refresh,
# five minutes by default, and as group leader it assigns nobody anything ("No partition
# metadata"). Members therefore refresh each second, and `subscribe_kafka_python` has the
# topics' partitions fetched before subscribing (on a loaded machine the refresh alone still
# left a leader without partitions for 20 s).
KAFKA_PYTHON_MEMBER = {"metadata_max_age_ms": 1000}


def subscribe_kafka_python(consumer: Any, topics: list[str], **kwargs: Any) -> None:
    """Subscribe a kafka-python consumer once it knows every topic's partitions."""
    for topic in topics:
        assert consumer.partitions_for_topic(topic), f"no partitions for {topic}"
    consumer.subscribe(topics, **kwargs)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create `name` with `partitions` partitions through librdkafka's admin client."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(10)
