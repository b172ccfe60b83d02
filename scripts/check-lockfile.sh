#!/usr/bin/env bash
# A fresh clone's `npm install` leaves package-lock.json as committed: a lockfile that disagrees
# with package.json (a peer missing from the root entry) is rewritten on every contributor's first
# install and shows up as a change nobody made. Checks the committed HEAD, in a clone of its own.
# `--lock-only` resolves without installing node_modules (seconds instead of minutes).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
clone="$(mktemp -d)"
trap 'rm -rf "$clone"' EXIT
git clone --quiet --no-hardlinks "$root" "$clone"
git -C "$clone" checkout --quiet "$(git -C "$root" rev-parse HEAD)"
cd "$clone"
if [ "${1:-}" = "--lock-only" ]; then
  npm install --package-lock-only --ignore-scripts --no-audit --no-fund >/dev/null
else
  npm install --ignore-scripts --no-audit --no-fund >/dev/null
fi
changed="$(git status --porcelain)"
if [ -n "$changed" ]; then
  echo "lockfile: \`npm install\` in a fresh clone changed:" >&2
  echo "$changed" >&2
  git --no-pager diff --stat >&2
  echo "fix: run \`npm install\` and commit package-lock.json" >&2
  exit 1
fi
echo "lockfile: a fresh clone's npm install leaves the tree clean"
