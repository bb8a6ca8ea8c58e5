"""``python -m rocketq``: the same as the ``rocketq`` command."""

from rocketq.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
