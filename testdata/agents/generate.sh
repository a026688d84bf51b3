#!/usr/bin/env bash
# Regenerates the real-agent transcripts under testdata/{claude,codex,pi,gemini}/ and
# testdata/agents/out/ by running the real CLIs against the scripted model
# server (internal/modelserver) on 127.0.0.1. See testdata/agents/README.md.
#
#   testdata/agents/generate.sh                 # all four CLIs
#   testdata/agents/generate.sh -only claude    # just one (others' outputs kept)
#
# Env: TINE_AGENTS_PREFIX (npm prefix holding the CLIs, default /tmp/tine-agents),
#      TINE_GEN_ROOT (scratch dir for homes and the project, default /tmp/tine-gen).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="${TINE_AGENTS_PREFIX:-/tmp/tine-agents}"
pkgs=(@anthropic-ai/claude-code@2.1.328 @openai/codex@0.169.0 @mariozechner/pi-coding-agent@0.73.1 @google/gemini-cli@0.61.0)

need_install=0
for b in claude codex pi gemini; do
	[[ -x "$prefix/node_modules/.bin/$b" ]] || need_install=1
done
if [[ $need_install == 1 ]]; then
	mkdir -p "$prefix"
	npm install --prefix "$prefix" --no-audit --no-fund "${pkgs[@]}"
fi

cd "$repo"
exec go run ./testdata/agents/gen -bin "$prefix/node_modules/.bin" -root "${TINE_GEN_ROOT:-/tmp/tine-gen}" "$@"
