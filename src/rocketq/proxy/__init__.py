"""RocketMQ 5's gRPC endpoint (the proxy's ``MessagingService``), served from inside a rocketq broker.

RocketMQ 5 clients (the gRPC ``rocketmq-clients``: Java, Go, Python, ...) talk to a proxy, which in 5.x's
"local" mode runs in the broker's process and calls its processors directly. rocketq does the same: the endpoint
(``grpcServerPort`` in ``broker.conf``, ``rocketq start --grpc-port``) turns each call into the broker's own work
(a send goes through the send processor; a receive pops from the store), so a gRPC client and a remoting client
see one broker.

- :mod:`rocketq.proxy.schema`: the protocol's messages (``apache.rocketmq.v2``), built at import.
- :mod:`rocketq.proxy.pop`: POP consumption (receive, invisible time, ack), what 5.x's simple and push consumers
  use instead of pulls.
- :mod:`rocketq.proxy.grpc_service`: the service and its server.

The extra ``grpc`` (``pip install rocketq[grpc]``) brings grpcio and protobuf.
"""
