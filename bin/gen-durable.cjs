#!/usr/bin/env node
'use strict';
// The `gen-durable` command (docs/cli.md): the CommonJS build of lib/cli/main.ts.
require('../dist/cjs/cli/main.js').main();
