#!/usr/bin/env bash
# Install the real Claude Code CLI (npm @anthropic-ai/claude-code@2.1.328) for the transcript
# tests, once per machine. Prints the binary's path. Tests find it through AGENTWATCH_CLAUDE_BIN,
# or at this default place. Idempotent: a second run only prints the version and the path.
set -euo pipefail
dir="${AGENTWATCH_AGENTS_DIR:-$HOME/.cache/agentwatch-agents}"
claude_version=2.1.328
bin="$dir/node_modules/.bin/claude"
installed() {
  [ -x "$bin" ] && grep -q "\"version\": \"$claude_version\"" \
    "$dir/node_modules/@anthropic-ai/claude-code/package.json" 2>/dev/null
}
if ! installed; then
  mkdir -p "$dir"
  cd "$dir"
  [ -f package.json ] || npm init -y >/dev/null
  # No install scripts phone home: the CLI runs offline against a scripted model server.
  npm install "@anthropic-ai/claude-code@$claude_version" --no-audit --no-fund >&2
fi
DISABLE_AUTOUPDATER=1 "$bin" --version >&2
echo "$bin"
