"""What several test files share (test files never import each other; conftest.py holds the
fixtures pytest discovers by itself).

==================  ===========================================================================
``training``        a toy model config and synthetic splits (trainer, clock, combined tests)
``distributed``     toy distributed jobs, and a real run checked against the emulator
``traps``           running a stage or module as a user would, the one-line error it fails with
``downloads``       small archives and Criteo rows, remote file records, a local HTTP server
``layout``          size caps that warn at 80%
``reference_het``   an independent model of HET's cache protocol (equivalence tests)
``public_sources``  the real samples' public sources served from 127.0.0.1
``claim_directions``  the claims' expected directions on the ci data
``browser``         Debian's chromium through playwright, or a skip saying how to get it
==================  ===========================================================================
"""
