import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The package root, found from this compiled file's location
 * (dist/test/support/ → three levels up), so tests work from any cwd.
 */
const packageRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/** `shared/` sits beside the repository (`main/`): ../../../../shared/data from the package root. */
export const porcupineHistoriesDir = resolve(packageRoot, '../../../../shared/data/porcupine-histories');

/** Throws with the path it looked at, so a missing checkout is obvious rather than a pile of ENOENTs. */
export function requirePorcupineHistories(): string {
  if (!existsSync(join(porcupineHistoriesDir, 'jepsen', 'EXPECTED.txt'))) {
    throw new Error(
      `shared test data not found at ${porcupineHistoriesDir} ` +
        `(expected the repository's parent folder to hold shared/data/porcupine-histories beside main/)`,
    );
  }
  return porcupineHistoriesDir;
}

export interface ExpectedVerdict {
  readonly file: string;
  readonly linearizable: boolean;
}

/** Parses jepsen/EXPECTED.txt: `etcd_NNN.log linearizable|not-linearizable` per line. */
export function readJepsenExpectations(dir: string): ExpectedVerdict[] {
  return readFileSync(join(dir, 'jepsen', 'EXPECTED.txt'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [file, verdict] = line.trim().split(/\s+/);
      if (file === undefined || (verdict !== 'linearizable' && verdict !== 'not-linearizable')) {
        throw new Error(`bad EXPECTED.txt line: ${line}`);
      }
      return { file, linearizable: verdict === 'linearizable' };
    });
}

/** kv/cNN-ok.txt are linearizable, kv/cNN-bad.txt are not. */
export function listKvHistories(dir: string): ExpectedVerdict[] {
  return readdirSync(join(dir, 'kv'))
    .filter((file) => /^c\d+-(ok|bad)\.txt$/.test(file))
    .sort()
    .map((file) => ({ file, linearizable: file.endsWith('-ok.txt') }));
}
