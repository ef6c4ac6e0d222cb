#!/usr/bin/env bash
# Install the real opencode server (1.18.33, linux x64) for the end-to-end tests, once per machine.
# Prints the binary's path. Tests find it through AGENTWATCH_OPENCODE_BIN, or at this default place.
set -euo pipefail
dir="${AGENTWATCH_OPENCODE_DIR:-$HOME/.cache/agentwatch-opencode}"
bin="$dir/node_modules/opencode-linux-x64/bin/opencode"
if [ ! -x "$bin" ]; then
  mkdir -p "$dir"
  cd "$dir"
  [ -f package.json ] || npm init -y >/dev/null
  npm install opencode-linux-x64@1.18.33 --no-audit --no-fund >&2
fi
"$bin" --version >&2
echo "$bin"
