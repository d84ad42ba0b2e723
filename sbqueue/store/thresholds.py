"""The sizes that choose how an operation runs, in one place (issue 43).

On the local executor an operation reads and commits on the driver while what it reads
stays small; past these sizes it runs as Spark jobs (the Spark executor runs everything
that way). Each bound keeps the driver's cost independent of what a queue holds: a read
past it is cut, never grown. Each is cited with the decision that measured it; the
modules that apply them import them from here.
"""

from __future__ import annotations

__all__ = ["HEAD_ROWS", "INLINE_ROWS", "MARKS_READ", "MAX_RUNS", "MIN_RANGE",
           "PLAIN_FILE_BYTES", "READ_CAP", "ROW_IDS_DEPTH", "ROW_LIMIT", "SESSION_HEAD",
           "SMALL_PASS", "SMALL_RECEIVE", "SMALL_SEND", "WALK", "WALK_COMMITS"]

# -- sends -----------------------------------------------------------------------------------
# Messages a client send commits on the driver at most; more: one Spark append
# (decision 015: a 200-message send on the driver beside Spark's job per send).
SMALL_SEND = 200

# -- receives --------------------------------------------------------------------------------
# Messages a receive decided on the driver asks for at most (decision 011, step 4: the
# prefetching client's batches, 100 a call, without a Spark job).
SMALL_RECEIVE = 100
# Inbox rows a small receive reads beyond those asked: expired, future and void rows are
# passed, not handed out; a head cut short of what it must hand out goes to Spark.
HEAD_ROWS = 32
# Inbox rows a session receive reads at most: other sessions' messages lie between a
# session's own (decision 016).
SESSION_HEAD = 1024
# Cursors, commit markers and completion records a small receive reads at most.
MARKS_READ = 4096
# Inbox rows a cursor pass decided on the driver reads at most (decision 021:
# maintenance's expire-and-advance and a scheduled cancel's pass).
SMALL_PASS = 4096
# A DataFrame receive asking at least this many takes range locks, one row a partition
# (decision 018: the drain of 1,000,000 at 0.12x a raw append); fewer: one row a message.
MIN_RANGE = 1_000
# Inbox head rows a forwarding or range claim reads on the driver at most (narrow).
READ_CAP = 2_000_000
# Runs of consecutive numbers one expression numbers at most; more: a join (decision 018).
MAX_RUNS = 512
# Commits after the earliest cursor that a head read's bound walks through (decision 034).
WALK = 8
# Commits a driver-side duplicate check walks back through at most (decision 036).
WALK_COMMITS = 512

# -- files written on the driver -------------------------------------------------------------
# Bytes (decoded) up to which a data file the driver writes is plain Parquet (no
# compression, no dictionary); larger ones are zstd (decision 047: a 3-row ledger file
# took 1.7 ms to write with zstd and dictionaries, 0.5 ms without; bodies compress).
PLAIN_FILE_BYTES = 64 << 10

# -- reads and rows --------------------------------------------------------------------------
# Rows a driver read looks at at most; more: Spark reads (decision 012).
ROW_LIMIT = 20_000
# Commits walked back at most to find the files holding some row ids (a topic's numbers).
ROW_IDS_DEPTH = 1000
# Rows ``engine.columns.values_frame`` writes as SQL literals at most; more: a DataFrame.
INLINE_ROWS = 1000
