"""spark-submit entry point of the resubmit job (the same as the wheel's ``sbqueue-resubmit``):

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/resubmit.py --namespace PATH ...

The session spark-submit configured is used as it is. See ``sbqueue.jobs.resubmit``.
"""

import sys

from sbqueue.jobs.resubmit import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
