#!/usr/bin/env node
import { main } from '../dist/src/workers/clicks/replay-cli.js';

process.exitCode = await main(process.argv.slice(2));
