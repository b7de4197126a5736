#!/usr/bin/env node
import { main } from '../dist/src/clicks/replay-cli.js';

process.exitCode = await main(process.argv.slice(2));
