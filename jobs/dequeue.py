"""spark-submit entry point of the dequeue job (the same as the wheel's ``sbqueue-dequeue``):

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/dequeue.py --namespace PATH ...

The session spark-submit configured is used as it is. See ``sbqueue.jobs.dequeue``.
"""

import sys

from sbqueue.jobs.dequeue import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
