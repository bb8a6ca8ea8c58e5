"""remoting layer of rocketq: RocketMQ's TCP protocol (see ARCHITECTURE.md).

A sans-I/O core and a thin asyncio shell, mirroring RocketMQ's ``remoting`` module:

- ``codes``: request, response and language codes, serialize types, flag bits, versions;
- ``command``: ``RemotingCommand`` and its frame, JSON and ROCKETMQ header codecs;
- ``codec``: ``FrameDecoder``, bytes in, commands out;
- ``rocketq.common.json_compat`` (shared with the store): the JSON dialect of fastjson in bodies;
- ``transport``: ``RemotingServer`` and ``RemotingClient`` over asyncio streams;
- ``errors``: the exceptions of this layer.

Imports only from ``rocketq.common``.
"""
