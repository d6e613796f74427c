"""A channel of the process's layer in some groups, for a test that reads events as a
view does, left again when the test is done with it (as the views leave theirs: a
channel left in a group is counted and fed by every later test of the process)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from channels.layers import get_channel_layer


@asynccontextmanager
async def listening(*groups: str) -> AsyncIterator[str]:
    """A new channel in ``groups`` for the block; it leaves them after."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    try:
        yield channel
    finally:
        for group in groups:
            await layer.group_discard(group, channel)
