"""cputrace: processor instruction traces from many sources, as one queryable history."""

__version__ = "0.1.0"
