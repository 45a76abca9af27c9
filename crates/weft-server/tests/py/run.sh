#!/usr/bin/env bash
# Runs the redis-py tests against a release `weft serve`.
#
#   cargo build --release -p weft-cli
#   crates/weft-server/tests/py/run.sh [pytest args]
#
# Needs a Python with `redis` and `pytest` ($PYTHON, default python3; e.g.
# python3 -m venv V && V/bin/pip install redis pytest && PYTHON=V/bin/python).
# The server binary is $WEFT_BIN, else $CARGO_TARGET_DIR/release/weft, else
# target/release/weft; each test starts its own on a free loopback port.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "${PYTHON:-python3}" -m pytest -q -p no:cacheprovider "$here" "$@"
