"""``python -m evals.quality``: see ``evals.quality.cli``."""

from evals.quality.cli import main

if __name__ == "__main__":
    main()
