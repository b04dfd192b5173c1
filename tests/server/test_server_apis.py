"""The API table: each API declared once, and each declared API answered by exactly one service."""

from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from logstore.server.apis import APIS, bind, declare
from logstore.server.protocol import ApiSpec


class Answers:
    async def api_versions(self, req):
        return req.response()


class AlsoAnswers(Answers):
    pass


API_VERSIONS = ApiSpec(ApiVersionsRequest, ApiVersionsResponse, 0, 3, Answers.api_versions)


def test_every_declared_api_is_keyed_by_its_request_and_named_after_it():
    assert all(key == api.request.API_KEY for key, api in APIS.items())
    assert APIS[ApiVersionsRequest.API_KEY].name == "ApiVersions"


def test_an_api_declared_twice_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        declare(API_VERSIONS, API_VERSIONS._replace(max_version=2))


def test_each_api_is_bound_to_the_one_service_that_defines_its_handler():
    service = Answers()
    handlers = bind(declare(API_VERSIONS), [object(), service])
    assert handlers[API_VERSIONS.key] == service.api_versions


@pytest.mark.parametrize("services", [[], [Answers(), AlsoAnswers()]])
def test_an_api_answered_by_no_service_or_by_two_is_refused(services):
    with pytest.raises(ValueError, match="services, not one"):
        bind(declare(API_VERSIONS), services)
