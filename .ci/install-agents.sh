#!/usr/bin/env bash
# Install the real agent CLIs the transcript tests drive offline, once per machine:
#   claude  npm @anthropic-ai/claude-code@2.1.328
#   codex   npm @openai/codex@0.169.0
#   gemini  npm @google/gemini-cli@0.61.0
# Usage: .ci/install-agents.sh [claude|codex|gemini ...] (default: claude). Prints each
# binary's path, one per line, in the order asked. Tests find them through
# AGENTWATCH_CLAUDE_BIN / AGENTWATCH_CODEX_BIN / AGENTWATCH_GEMINI_BIN, or at this default
# place. Idempotent: a second run only prints the versions and the paths.
set -euo pipefail
dir="${AGENTWATCH_AGENTS_DIR:-$HOME/.cache/agentwatch-agents}"

package_of() {
  case "$1" in
    claude) echo "@anthropic-ai/claude-code 2.1.328" ;;
    codex) echo "@openai/codex 0.169.0" ;;
    gemini) echo "@google/gemini-cli 0.61.0" ;;
    *) return 1 ;;
  esac
}

installed() { # package version
  [ -f "$dir/node_modules/$1/package.json" ] \
    && grep -q "\"version\": \"$2\"" "$dir/node_modules/$1/package.json"
}

[ "$#" -gt 0 ] || set -- claude
for agent in "$@"; do
  if ! spec="$(package_of "$agent")"; then
    echo "unknown agent '$agent' (expected claude, codex or gemini)" >&2
    exit 64
  fi
  read -r package version <<<"$spec"
  bin="$dir/node_modules/.bin/$agent"
  if ! [ -x "$bin" ] || ! installed "$package" "$version"; then
    mkdir -p "$dir"
    (
      cd "$dir"
      [ -f package.json ] || npm init -y >/dev/null
      # No install scripts phone home: the CLIs run offline against a scripted model server.
      npm install "$package@$version" --no-audit --no-fund >&2
    )
  fi
  # Checked quietly: no update check, no relaunch.
  DISABLE_AUTOUPDATER=1 GEMINI_CLI_NO_RELAUNCH=true "$bin" --version >&2
  echo "$bin"
done
