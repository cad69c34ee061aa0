"""BLAKE2b for content hashes (the cache's keys, the digests of project files) without importing
`hashlib`, which loads OpenSSL's libcrypto first (about 3 ms of every run's start-up, against
0.3 ms for CPython's own `_blake2`, which every CPython build has)."""

try:
    from _blake2 import blake2b
except ImportError:  # an interpreter without it: the same function through hashlib
    from hashlib import blake2b

__all__ = ["blake2b"]
