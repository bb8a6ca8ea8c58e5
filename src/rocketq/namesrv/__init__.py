"""The name server: route table, broker registration and KV config (RocketMQ's ``namesrv``)."""
