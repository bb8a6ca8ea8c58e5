"""Settings of RocketMQ 4.9.4's configuration classes that rocketq accepts, keeps and reports, but does not act on.

A Java broker answers getBrokerConfig with every field of the four objects its ``Configuration`` holds
(``BrokerConfig``, ``NettyServerConfig``, ``NettyClientConfig``, ``MessageStoreConfig``), and a name server
answers getNamesrvConfig with ``NamesrvConfig`` and ``NettyServerConfig``. Many of those fields size Java's thread
pools and Netty buffers, or switch on what rocketq does not build; rocketq has no use for them. Tools read them
all the same (``mqadmin exportConfigs``, dashboards, scripts that diff two brokers' settings), so rocketq keeps
each such key with 4.9.4's default, takes a value for it from ``broker.conf`` or an update request, and shows it
back, without acting on it. Defaults that Java derives from the processor count are derived the same way here.
"""

from __future__ import annotations

import os

__all__ = ["broker_java_only_settings", "netty_server_settings", "parse_like"]


def _cores() -> int:
    return os.cpu_count() or 1


def parse_like(raw: str, default: str) -> str:
    """*raw* parsed as Java's setter parses a value for a field whose default is *default* (a boolean, an integer
    or text), in the form Java prints it back; ``ValueError`` when it does not parse."""
    value = raw.strip()
    if default in ("true", "false"):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {raw!r}")
        return value.lower()
    if default.lstrip("-").isdigit():
        try:
            return str(int(value))
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    return value


def netty_server_settings() -> dict[str, str]:
    """``NettyServerConfig`` without ``listenPort`` (the server's own) and ``serverChannelMaxIdleTimeSeconds``
    (the broker acts on it; the name server lists it from here)."""
    return {
        "serverWorkerThreads": "8", "serverCallbackExecutorThreads": "0", "serverSelectorThreads": "3",
        "serverOnewaySemaphoreValue": "256", "serverAsyncSemaphoreValue": "64",
        "serverSocketSndBufSize": "0", "serverSocketRcvBufSize": "0", "writeBufferHighWaterMark": "0",
        "writeBufferLowWaterMark": "0", "serverSocketBacklog": "1024", "serverPooledByteBufAllocatorEnable": "true",
        "useEpollNativeSelector": "false",
    }  # fmt: skip


def _netty_client_settings() -> dict[str, str]:
    """``NettyClientConfig`` (a broker's client to the name servers and to its master)."""
    return {
        "clientWorkerThreads": "4", "clientCallbackExecutorThreads": str(_cores()),
        "clientOnewaySemaphoreValue": "65535", "clientAsyncSemaphoreValue": "65535", "connectTimeoutMillis": "3000",
        "channelNotActiveInterval": "60000", "clientChannelMaxIdleTimeSeconds": "120",
        "clientSocketSndBufSize": "0", "clientSocketRcvBufSize": "0", "clientPooledByteBufAllocatorEnable": "false",
        "clientCloseSocketIfTimeout": "true", "useTLS": "false",
    }  # fmt: skip


def _broker_and_store_settings() -> dict[str, str]:
    """``BrokerConfig`` and ``MessageStoreConfig`` fields rocketq has no use for: thread pools and their queues,
    the commercial and statistics switches, and features not built (consume-queue ext, LMQ, DLedger, the
    asynchronous schedule delivery)."""
    cores = _cores()
    send_threads = min(cores, 4)
    return {
        # thread pools and their queues
        "sendMessageThreadPoolNums": str(send_threads), "putMessageFutureThreadPoolNums": str(min(cores, 4)),
        "pullMessageThreadPoolNums": str(16 + cores * 2), "processReplyMessageThreadPoolNums": str(16 + cores * 2),
        "queryMessageThreadPoolNums": str(8 + cores), "adminBrokerThreadPoolNums": "16",
        "clientManageThreadPoolNums": "32", "consumerManageThreadPoolNums": "32",
        "heartbeatThreadPoolNums": str(min(32, cores)),
        "endTransactionThreadPoolNums": str(max(8 + cores * 2, send_threads * 4)),
        "putThreadPoolQueueCapacity": "10000", "pullThreadPoolQueueCapacity": "100000",
        "replyThreadPoolQueueCapacity": "10000", "queryThreadPoolQueueCapacity": "20000",
        "clientManagerThreadPoolQueueCapacity": "1000000", "consumerManagerThreadPoolQueueCapacity": "1000000",
        "heartbeatThreadPoolQueueCapacity": "50000", "endTransactionPoolQueueCapacity": "100000",
        "waitTimeMillsInSendQueue": "200", "waitTimeMillsInPullQueue": "5000",
        "waitTimeMillsInHeartbeatQueue": "31000", "waitTimeMillsInTransactionQueue": "3000",
        "brokerFastFailureEnable": "true", "startAcceptSendRequestTimeStamp": "0",
        "osPageCacheBusyTimeOutMills": "1000", "useReentrantLockWhenPutMessage": "true",
        "fastFailIfNoBufferInStorePool": "false",
        # statistics and the commercial figures
        "commercialEnable": "true", "commercialTimerCount": "1", "commercialTransCount": "1",
        "commercialBigCount": "1", "commercialBaseCount": "1", "enableDetailStat": "true",
        "autoDeleteUnusedStats": "false", "enableScheduleMessageStats": "true", "diskFallRecorded": "true",
        "consumerFallbehindThreshold": str(16 * 1024 * 1024 * 1024), "disableConsumeIfConsumerReadSlowly": "false",
        "flushConsumerOffsetHistoryInterval": "60000", "putMsgIndexHightWater": "600000",
        "flushLeastPagesWhenWarmMapedFile": "4096", "redeleteHangedFileInterval": "120000",
        "maxDelayTime": "40", "debugLockEnable": "false", "highSpeedMode": "false", "duplicationEnable": "false",
        "fetchNamesrvAddrByAddressServer": "false", "filterServerNums": "0", "isolateLogEnable": "false",
        "isEnableBatchPush": "false", "messageStorePlugIn": "",
        # features not built
        "enableConsumeQueueExt": "false", "mappedFileSizeConsumeQueueExt": str(48 * 1024 * 1024),
        "bitMapLengthConsumeQueueExt": "112", "enableCalcFilterBitMap": "false", "expectConsumerNumUseFilter": "32",
        "maxErrorRateOfBloomFilter": "20", "enableDLegerCommitLog": "false", "enableLmq": "false",
        "enableMultiDispatch": "false", "maxLmqConsumeQueueNum": "20000", "enableScheduleAsyncDeliver": "false",
        "scheduleAsyncDeliverMaxPendingLimit": "2000", "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    }  # fmt: skip


def broker_java_only_settings() -> dict[str, str]:
    """Every setting a 4.9.4 broker lists that rocketq keeps without acting on, at its default."""
    return {**netty_server_settings(), **_netty_client_settings(), **_broker_and_store_settings()}
