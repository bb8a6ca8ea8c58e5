"""broker layer of rocketq: RocketMQ's broker (see ARCHITECTURE.md), over the store and the remoting layer.

Mirrors RocketMQ's ``broker`` module, one concept a module:

- ``broker_config``: ``BrokerConfig`` with ``broker.conf`` property names (and the store's config from the
  same file);
- ``broker_controller``: ``BrokerController``, the process: store, the two listeners, registration with
  the name servers, periodic persistence, shutdown;
- ``broker_outer_api``: REGISTER_BROKER / UNREGISTER_BROKER to every name server;
- ``topic_validator``, ``topic_config_manager``, ``subscription_group_manager``: topics (system topics,
  the ``TBW102`` template, retry and DLQ topics) and consumer groups;
- ``consumer_manager``, ``producer_manager``, ``rebalance_lock_manager``, ``client_housekeeping_service``:
  the clients seen through heartbeats, their connections and their queue locks;
- ``protocol``: the JSON bodies and enums of the client protocol the broker reads and writes;
- ``expression_message_filter``: tag filtering of pulls (tag code, then tag string);
- the processors, one per module: ``send_message_processor``, ``pull_message_processor`` (with
  ``pull_request_hold_service`` for long polling), ``query_message_processor``,
  ``client_manage_processor``, ``consumer_manage_processor``, ``admin_broker_processor``,
  ``end_transaction_processor``;
- ``schedule_message_service``: delivery of delayed messages (and so of consumer retries) when due;
- ``timer_message_service``: messages due at any time (5.x's ``TIMER_*`` properties), with their own progress file;
- ``transactional_message_service``, ``transactional_message_check_service``: half and op records, and the
  check-back of unresolved transactions;
- ``broker_stats``: put/get counters and TPS for the runtime info.
"""
