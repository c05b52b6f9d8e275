"""m0serve's Python side: application discovery and framework helpers.

The server itself is C (the ``m0serve`` binary); this package is found by
the embedded interpreter automatically and needs nothing but the stdlib.
"""

__all__ = ["__version__"]
__version__ = "0.1.0"
