"""spark-submit entry point of the forward job (the same as the wheel's ``sbqueue-forward``):

    spark-submit --properties-file "$(sbqueue spark-conf)" jobs/forward.py --namespace PATH ...

The session spark-submit configured is used as it is. See ``sbqueue.jobs.forward``.
"""

import sys

from sbqueue.jobs.forward import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
