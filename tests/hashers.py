"""A password hasher for the test suite: Django's PBKDF2 with one iteration.

The default (over a million iterations) costs about a second per user created or logged in, which the suite pays
hundreds of times. The hashes keep the `pbkdf2_sha256$<iterations>$...` format, so a server or worker started
as a subprocess with the default hashers still verifies them.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class FastPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1
