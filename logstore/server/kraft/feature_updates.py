"""UpdateFeatures (key 57, v0-2), as `kafka-features upgrade/downgrade` sends it: brokers forward
it to the active controller, which finalizes the levels (`QuorumController.update_features`),
e.g. `eligible.leader.replicas.version=1` to turn KIP-966's eligible leader replicas on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logstore.server import error_codes as ec
from logstore.server.protocol import Request

UPGRADE = 1  # FeatureUpdate.UpgradeType: 1 upgrade, 2 safe downgrade, 3 unsafe downgrade


def requested(req: Request) -> list[tuple[str, int, bool]]:
    """(feature, level, downgrade allowed) of each update (v0's AllowDowngrade, v1+'s UpgradeType)."""
    return [(u.feature, u.max_version_level,
             u.allow_downgrade if req.version == 0 else u.upgrade_type != UPGRADE)
            for u in req.body.feature_updates]


def validate_only(req: Request) -> bool:
    return req.version >= 1 and req.body.validate_only


def respond(req: Request, results: Mapping[str, tuple[int, str | None]]) -> Any:
    """v0-1 answer each feature; v2 answers with the first error only, as Kafka 4.0 does."""
    first = next(((error, message) for error, message in results.values() if error != ec.NONE), (ec.NONE, None))
    if req.version >= 2:
        return req.response(throttle_time_ms=0, error_code=first[0], error_message=first[1])
    entry = req.spec.response.UpdatableFeatureResult
    return req.response(throttle_time_ms=0, error_code=ec.NONE, error_message=None, results=[
        entry(feature=name, error_code=error, error_message=message) for name, (error, message) in results.items()])


def standalone(req: Request) -> Any:
    """A standalone node has no finalized features to change."""
    return respond(req, {name: (ec.INVALID_UPDATE_VERSION, "a standalone node has no finalized features")
                         for name, _level, _downgrade in requested(req)})
