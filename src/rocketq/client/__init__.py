"""client layer of rocketq: a Python producer and consumers over the remoting protocol (see ARCHITECTURE.md).

Mirrors the Java client of RocketMQ 4.9 (``org.apache.rocketmq.client``), one concept a module:

- ``producer``: ``Producer`` (sync, async, one-way, batch, ordered by selector, request-reply),
  ``new_message`` and ``create_reply_message``;
- ``push_consumer``: ``PushConsumer`` with a listener, concurrent or orderly, clustering or broadcasting;
- ``pull_consumer``: ``PullConsumer``, pulls at an offset (with long polling);
- ``lite_pull_consumer``: ``LitePullConsumer``, ``poll()`` over subscribed or assigned queues;
- ``blocking``: the same four for code without an event loop (context managers, iterators);
- ``admin``: ``MQAdmin``, the admin API behind ``rocketq admin`` (``DefaultMQAdminExt``), over raw remoting;
- ``client_instance`` (``MQClientInstance``), ``mq_client_api`` (``MQClientAPIImpl``), ``route``,
  ``heartbeat``, ``rebalance``, ``allocate_strategy``, ``offset_store``, ``process_queue``, ``pull_api``,
  ``consume_concurrently``, ``consume_orderly``, ``fault_strategy``, ``queue_selector``, ``listener``,
  ``send_result``, ``pull_result``, ``errors``, ``client_config``.

Imports ``remoting`` and ``common`` only.
"""

from rocketq.client.allocate_strategy import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from rocketq.client.client_config import ClientConfig
from rocketq.client.errors import (
    BrokerBusyError,
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ClientNotRunningError,
    ClientTimeoutError,
    InvalidMessageError,
    NoRouteError,
    RequestTimeoutError,
)
from rocketq.client.heartbeat import EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG, ConsumeFromWhere, MessageModel
from rocketq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from rocketq.client.lite_pull_consumer import LitePullConsumer
from rocketq.client.message_queue import MessageQueue
from rocketq.client.producer import Producer, create_reply_message, new_message
from rocketq.client.pull_consumer import PullConsumer
from rocketq.client.pull_result import PullResult, PullStatus
from rocketq.client.push_consumer import PushConsumer
from rocketq.client.queue_selector import SelectMessageQueueByHash, SelectMessageQueueByRandom
from rocketq.client.send_result import SendResult, SendStatus
from rocketq.common.acl import SessionCredentials
from rocketq.common.message import Message, MessageClientExt, MessageExt

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "BrokerBusyError",
    "BrokerError",
    "BrokerUnreachableError",
    "ClientConfig",
    "ClientError",
    "ClientNotRunningError",
    "ClientTimeoutError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "InvalidMessageError",
    "LitePullConsumer",
    "Message",
    "MessageClientExt",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "NoRouteError",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RequestTimeoutError",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "SessionCredentials",
    "create_reply_message",
    "new_message",
]
