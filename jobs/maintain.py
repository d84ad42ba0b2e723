"""spark-submit entry point of the maintain job (the same as the wheel's ``sbqueue-maintain``):

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/maintain.py --namespace PATH ...

The session spark-submit configured is used as it is. See ``sbqueue.jobs.maintain``.
"""

import sys

from sbqueue.jobs.maintain import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
