"""Properties of the controller's partition changes (`partition_change`, Kafka's
PartitionChangeBuilder over `replication.election`'s rules), replayed as the metadata image replays
them, over random histories of brokers failing, returning cleanly or after an unclean shutdown,
and followers catching up. A model of which replicas hold every committed record is the oracle:
KIP-966's promise is that a clean election never picks one that may not."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.replication.election import UncleanRecoveryStrategy, isr_after_fencing
from logstore.server.kraft import metadata_records as mr
from logstore.server.kraft.metadata_image import MetadataImage
from logstore.server.kraft.partition_change import ElectionPolicy, partition_change

TOPIC_ID = uuid.UUID(int=7)
REPLICAS = [1, 2, 3]
CHANGE_DEFAULTS = {"isr": None, "replicas": None, "leaderRecoveryState": mr.NO_RECOVERY_STATE_CHANGE}

policies = st.builds(ElectionPolicy, st.booleans(), st.integers(1, 3), st.sampled_from(list(UncleanRecoveryStrategy)))
events = st.lists(st.tuples(st.sampled_from(["fence", "return", "unclean_return", "catch_up"]),
                            st.sampled_from(REPLICAS)), max_size=25)


class History:
    """One partition, its live brokers, and the replicas known to hold every committed record."""

    def __init__(self, policy: ElectionPolicy):
        self.policy = policy
        self.image = MetadataImage()
        self.image.replay("TopicRecord", 0, {"name": "t", "topicId": TOPIC_ID})
        self.image.replay(*mr.partition(TOPIC_ID, 0, REPLICAS, REPLICAS, REPLICAS[0], []))
        self.live = set(REPLICAS)
        self.complete = set(REPLICAS)

    @property
    def p(self):
        return self.image.topics[TOPIC_ID].partitions[0]

    def change(self, live: set[int], **options) -> None:
        before, eligible = self.p.leader, {*self.p.isr, *self.p.elr} - set(options.get("unclean_shutdown", ()))
        record = partition_change(TOPIC_ID, 0, self.p, live, self.policy, kind=self.policy.kind(), **options)
        if record is None:
            return
        fields = record[2]
        self.image.replay(record[0], record[1], {**CHANGE_DEFAULTS, **fields})
        if fields["leader"] not in (mr.NO_LEADER_CHANGE, mr.NO_LEADER, before):
            if fields["leader"] in eligible:  # a clean election: from the ISR, or the ELR
                assert self.p.leader in self.complete, "a clean election picked a replica missing records"
            else:  # unclean: the topic allows it, and its log is the history now
                assert self.policy.unclean_recovery is not UncleanRecoveryStrategy.NONE
                assert self.p.leader_recovery_state == mr.RECOVERING and self.p.isr == [self.p.leader]
                self.complete = {self.p.leader}

    def commit(self) -> None:
        """Records are committed while there is a leader: every ISR member holds them (with ELR
        on, only while the ISR holds min.insync.replicas: KIP-966's high watermark rule)."""
        if self.p.leader >= 0 and (not self.policy.eligible_leader_replicas
                                   or len(self.p.isr) >= self.policy.min_insync_replicas):
            self.complete = set(self.p.isr)

    def apply(self, event: str, broker: int) -> None:
        if event == "fence" and broker in self.live:
            self.live.discard(broker)
            kept = isr_after_fencing(self.p.isr, [broker], eligible_leader_replicas=self.policy.eligible_leader_replicas)
            self.change(self.live, isr=[r for r in self.p.isr if r in kept])
        elif event in ("return", "unclean_return") and broker not in self.live:
            if event == "unclean_return":
                self.complete.discard(broker)  # it may have lost what it had not flushed
                if self.policy.eligible_leader_replicas:
                    self.change(self.live, isr=[r for r in self.p.isr if r != broker], unclean_shutdown=[broker])
            self.live.add(broker)
            if self.p.leader == mr.NO_LEADER:
                self.change(self.live)
        elif event == "catch_up" and broker in self.live and self.p.leader >= 0 and broker not in self.p.isr:
            if self.p.leader in self.complete:
                self.complete.add(broker)  # it fetched the leader's whole log
            self.change(self.live, isr=[*self.p.isr, broker])
        self.commit()


def check_invariants(h: History) -> None:
    p, policy = h.p, h.policy
    assert p.leader == mr.NO_LEADER or (p.leader in h.live and p.leader in p.isr)
    assert not set(p.elr) & set(p.isr) and set(p.elr) <= set(REPLICAS)
    if policy.eligible_leader_replicas:
        assert not p.elr or len(p.isr) < policy.min_insync_replicas
    else:
        assert p.isr and not p.elr
    may_lead = [r for r in REPLICAS if r in h.live and (r in p.isr or (not p.isr and r in p.elr))]
    assert p.leader != mr.NO_LEADER or not may_lead, "a replica could lead cleanly but none was elected"


@settings(max_examples=300, deadline=None)
@given(policy=policies, history=events)
def test_clean_elections_keep_every_committed_record_and_the_partition_available(policy, history):
    h = History(policy)
    for event, broker in history:
        if event == "unclean_return" and not policy.eligible_leader_replicas:
            continue  # without ELR the controller cannot tell (the data loss KIP-966 fixes)
        h.apply(event, broker)
        check_invariants(h)
