"""Entry script for ``spark-submit``: ``spark-submit [options] .../rocketq/spark/__main__.py <job> ...``.

The same as ``rocketq spark <job> ...`` (see :mod:`rocketq.cli.spark_cmd`), in
the session ``spark-submit`` created (its master, its ``--py-files``). Also
``python -m rocketq.spark <job> ...``.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from rocketq.cli.main import main

    sys.exit(main(["spark", *sys.argv[1:]]))
