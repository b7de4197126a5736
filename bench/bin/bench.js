#!/usr/bin/env node
import { main } from '../dist/src/cli.js';

process.exit(await main(process.argv));
