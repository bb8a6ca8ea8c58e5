"""Operator tools over the remoting protocol: RocketMQ's ``tools`` module (``DefaultMQAdminExt``).

:mod:`rocketq.tools.admin` is the asyncio admin API that ``rocketq admin`` prints from. It speaks to name
servers and brokers with :class:`rocketq.remoting.transport.RemotingClient` directly and imports nothing
above ``remoting`` and ``common``.
"""
