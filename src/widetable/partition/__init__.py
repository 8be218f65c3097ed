"""Partitions: contiguous ranges of a table's partition key inside the one RocksDB.

``map`` routes each request; ``meta`` persists maps and split history;
``stats`` keeps windowed counters and hot keys; ``split`` splits by size and
load and merges cold neighbours; ``throttle`` enforces per-partition capacity;
``retry`` retries throttled calls; ``scan`` computes split points and scans
in parallel; ``manager`` ties them to a database.
"""

from .manager import PartitionInfo, PartitionManager
from .meta import PartitionEvent
from .retry import Retrier
from .scan import SplitRange

__all__ = ["PartitionEvent", "PartitionInfo", "PartitionManager", "Retrier", "SplitRange"]
