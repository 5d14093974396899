import pytest

from tests.gateway.harness import running_stack

pytestmark = pytest.mark.anyio


async def test_query_round_trip_echoes_message() -> None:
    async with running_stack() as stack:
        response = await stack.client.post(
            "/tools/mock/echo:invoke", json={"arguments": {"message": "hi"}}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["data"]["response"]["result"] == {
            "status": "succeeded",
            "outputs": {"message": "hi"},
        }
