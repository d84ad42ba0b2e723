"""spark-submit entry point of the enqueue job (the same as the wheel's ``sbqueue-enqueue``):

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/enqueue.py --namespace PATH ...

The session spark-submit configured is used as it is. See ``sbqueue.jobs.enqueue``.
"""

import sys

from sbqueue.jobs.enqueue import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
