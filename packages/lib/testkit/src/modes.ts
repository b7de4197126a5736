/** Checks of what processes leave on disk. */
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface ModeCount {
  folders: number;
  files: number;
  /** `path mode` of every folder not 0700 and every file not 0600 (symlinks and sockets are not checked). */
  loose: string[];
}

/** Walks `root` (itself included): every folder must be 0700, every regular file 0600, the owner's only. */
export function ownerOnlyModes(root: string): ModeCount {
  const out: ModeCount = { folders: 0, files: 0, loose: [] };
  const visit = (path: string): void => {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      return; // removed while walking (a LevelDB compaction, a rotated segment)
    }
    const mode = st.mode & 0o777;
    if (st.isDirectory()) {
      out.folders++;
      if (mode !== 0o700) out.loose.push(`${path} ${mode.toString(8)}`);
      let names: string[] = [];
      try {
        names = readdirSync(path);
      } catch {
        return;
      }
      for (const name of names) visit(join(path, name));
    } else if (st.isFile()) {
      out.files++;
      if (mode !== 0o600) out.loose.push(`${path} ${mode.toString(8)}`);
    }
  };
  visit(root);
  return out;
}
