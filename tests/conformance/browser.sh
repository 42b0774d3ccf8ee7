#!/usr/bin/env bash
# A browser for the conformance suite's authorization servers, which grant at once: it opens
# the authorization address and follows the redirect back to codemode's loopback port.
exec curl --silent --show-error --location --max-redirs 5 --output /dev/null "$1"
