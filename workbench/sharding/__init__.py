"""Sharding of sequence embedding tables over a two-level topology: FlexShard and the plans it is
compared with (table-, row-, column-, table-row-wise, hot-row data parallel), their traffic,
all-to-all time and memory, and FlexShard's cut-point planner."""
