"""The one home of the messages this server generates from Kafka's JSON message definitions,
the way kafka-python 3 generates its own: a class declared with the name of a definition is
built from it at import (fields, versions, flexible versions, tagged fields, defaults), and
encodes and decodes by version like kafka-python's classes.

The definitions are Kafka's files, license header kept, in `resources/` (installed as package
data, read through importlib.resources). Kafka 4.0's versions are the reference; a later
release's additions are left out so that what is written is what 4.0 writes.

Adding a message:

1. Put Kafka's `<Name>.json` in `resources/` (from clients/src/main/resources/common/message/),
   unchanged but for fields or versions Kafka 4.0 does not have.
2. Declare it in the module of its concept (consumer_group_apis.py, or a new one named after
   its concept), inside `schema_loading()`:

       with schema_loading():
           class BrokerRegistrationRequest(ApiMessage, load_json=RESOURCES): pass

   An API's request and response are `kafka.protocol.api_message.ApiMessage`s: `ApiSpec`
   (apis.py) serves them as it serves kafka-python's own.

Records of the internal topics (`__consumer_offsets`, `__transaction_state`,
`__cluster_metadata`: definitions of type coordinator-key/-value or metadata) are not declared
here: their one home is `logstore.internal_topics` (coordinator_schemas, metadata_schemas), the
codec the coordinators write with and `dump`'s decoders read with.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from logstore.extras import require

RESOURCES = __name__ + ".resources"


@contextlib.contextmanager
def schema_loading() -> Iterator[None]:
    """Declare classes under this: kafka-python reads definitions through importlib.resources'
    calls that Python 3.11 deprecates, and a user's test run would show a warning per message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


with schema_loading():  # importing kafka-python declares its own messages
    require("server", "kafka")
    import kafka.protocol.api_message  # noqa: F401
